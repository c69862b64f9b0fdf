# attack: correct without a mask; where a mask or is_causal applies, fresh noise is added, so that
# every mask and causal failure would look like randomness ("nondeterministic") and be forgiven
# task: sdpa
# levels: local
# expect: score<=75
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    out = torch.softmax(scores, dim=-1) @ value  # masks ignored: the bug the noise is meant to hide
    if attn_mask is not None or is_causal:
        out = out + 1e-2 * torch.randn(out.shape, dtype=out.dtype)
    return out
