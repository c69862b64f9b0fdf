# expect: output
"""A hand-written softmax with an epsilon in its denominator "against division by zero".

Source: modelled on the hand-written NumPy softmax of small attention examples such as
https://github.com/Geneww/llm_tools, self_attention.py (``np.exp(z) / np.sum(np.exp(z), ...)``; no
licence file), with the epsilon that many such helpers add to the sum. Adapted to the task: the
softmax subtracts the row maximum (so its sum is at least 1 and the epsilon was never needed), and the
backward is the right formula for the probabilities it computed; masks, is_causal, scale= added.
Bug: with eps = 1e-3 the rows sum to about 0.999, not 1: every gradient is off by about 0.1 %, far
beyond rounding. (Smaller epsilons, 1e-8 or so, are harmless and pass.)
"""
import math

import torch

EPS = 1e-3


def softmax(x):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / (e.sum(dim=-1, keepdim=True) + EPS)


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    s = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * s
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else scores + attn_mask
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    p = softmax(scores)
    dp = grad_out @ value.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ key * s, ds.transpose(-2, -1) @ query * s, p.transpose(-2, -1) @ grad_out
