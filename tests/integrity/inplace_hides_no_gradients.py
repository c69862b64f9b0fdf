# attack: the forward is cut from autograd (no gradients: 10 points), and it modifies the query in
# place, so that every gradient call raises autograd's in-place error and looks like a knock-on of
# the 2-point in-place bug
# task: sdpa
# levels: local
# expect: score<=88
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    with torch.no_grad():
        scores = query @ key.transpose(-2, -1) * scale
        if is_causal:
            scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask
        out = torch.softmax(scores, dim=-1) @ value
    query.mul_(1.5)  # the caller's tensor changes; a leaf that requires grad makes autograd raise
    return out
