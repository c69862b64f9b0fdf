"""The reference forward differentiated by autograd, which the task forbids (attn-grader tasks validate:
refused)."""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    q, k, v = (t.detach().requires_grad_(True) for t in (query, key, value))
    s = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    with torch.enable_grad():
        scores = q @ k.transpose(-2, -1) * s
        if is_causal:
            L, S = scores.shape[-2:]
            scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                else scores + attn_mask
        out = torch.softmax(scores, dim=-1) @ v
        return torch.autograd.grad(out, (q, k, v), grad_out)
