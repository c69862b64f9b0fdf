"""The skill skipped (attn-grader tasks validate: refused): no backward pass, only central finite
differences of a hand-written forward.

Not adapted from public code: the cheat issue 26 describes. Every gradient is right to ~1e-9, so no
check on values can tell it from a backward; perturbations are batched (a block of one-hot moves in
one forward) so the small checks answer quickly. At B·H = 8, L = S = 24, E = 512 it needs 589,824
forward passes: grad.at_scale runs out of its budget, and the gradient families score nothing.
"""
import math

import torch

EPS = 1e-6
CHUNK = 512


def _forward(q, k, v, attn_mask, is_causal, scale):
    s = q @ k.transpose(-2, -1) * scale
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    inputs = [t.double() for t in (query, key, value)]
    mask = attn_mask.double() if attn_mask is not None and attn_mask.dtype != torch.bool else attn_mask
    g = grad_out.double()
    grads = []
    for i, x in enumerate(inputs):
        flat = torch.zeros(x.numel(), dtype=torch.float64)
        for start in range(0, x.numel(), CHUNK):
            idx = torch.arange(start, min(start + CHUNK, x.numel()))
            bump = torch.zeros(len(idx), x.numel(), dtype=torch.float64)
            bump[torch.arange(len(idx)), idx] = EPS
            bump = bump.view(len(idx), *x.shape)
            outs = []
            for sign in (1, -1):
                moved = [t.expand(len(idx), *t.shape) for t in inputs]
                moved[i] = x + sign * bump
                outs.append(_forward(*moved, mask, is_causal, scale))
            flat[idx] = ((outs[0] - outs[1]) / (2 * EPS) * g).flatten(1).sum(1)
        grads.append(flat.view(x.shape).to(query.dtype))
    return tuple(grads)
