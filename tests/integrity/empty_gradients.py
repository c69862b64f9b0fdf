# attack: torch.autograd.grad replaced in the child, so the harness sends an empty gradient list
# (and, for some calls, gradients of shape (1,) that would broadcast against anything)
# task: sdpa
# expect: protocol
import math

import torch

_calls = [0]


def _fake_grad(outputs, inputs, *args, **kwargs):
    _calls[0] += 1
    return [] if _calls[0] % 2 else [torch.zeros(1) for _ in inputs]


torch.autograd.grad = _fake_grad


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.softmax(scores, -1) @ value
