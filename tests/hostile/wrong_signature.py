# malformed: the function takes the wrong arguments
# expect: exception
def scaled_dot_product_attention(qkv):
    return qkv
