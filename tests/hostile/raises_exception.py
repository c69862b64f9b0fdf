# malformed: raises inside the function
# expect: exception
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    raise ValueError("I have not finished this yet")
