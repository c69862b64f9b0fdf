# malformed: not UTF-8 (a Latin-1 byte in a string)
# expect: import
NAME = "café"

def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return q
