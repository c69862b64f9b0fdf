# attack: returns zeros of the right shape
# task: sdpa
# expect: notattention
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    return torch.zeros(*batch, query.size(-2), value.size(-1), dtype=query.dtype) + 0 * query.sum()
