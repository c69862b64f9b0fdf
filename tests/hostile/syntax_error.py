# malformed: syntax error
# expect: import
def scaled_dot_product_attention(q, k, v:
    return q
