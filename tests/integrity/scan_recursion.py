# attack: a 900-deep attribute chain makes a recursive rendering of it (ast.unparse) raise inside the
# source scan: a scan that cannot finish must be a detection, never a pass; it names torch's attention
# but never calls it, so where the run confirms static findings it costs forbidden.static alone
# task: sdpa
# expect: static
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, dim=-1) @ value


_never_called = lambda: torch.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.nn.functional.scaled_dot_product_attention
