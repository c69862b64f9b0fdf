# attack: modifies its inputs in place and patches the harness's comparison so the child reports nothing
# task: sdpa
# expect: inputs
import math
import sys

import torch

for _mod in list(sys.modules.values()):
    if hasattr(_mod, "serve") and hasattr(_mod, "call"):
        _mod.torch.equal = lambda a, b: True  # what a child-side comparison would use


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    query.mul_(scale)  # the caller's tensor changes
    scores = query @ key.transpose(-2, -1)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.softmax(scores, -1) @ value
