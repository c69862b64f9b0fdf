# malformed: returns a list of floats instead of a tensor
# expect: wrong
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return q.tolist()
