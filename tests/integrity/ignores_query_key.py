# attack: never reads query or key: the mean of the values (rows sum to 1, batch-independent, smooth)
# task: sdpa
# expect: notattention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    out = value.mean(dim=-2, keepdim=True)
    shape = list(value.shape)
    shape[-2] = query.size(-2)
    return (out + 0 * query.sum()).expand(*shape[:-2], query.size(-2), value.size(-1)).clone()
