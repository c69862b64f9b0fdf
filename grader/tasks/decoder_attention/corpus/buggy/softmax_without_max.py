# expect: stability
# bug: a hand-written softmax that never subtracts the row maximum (exp overflows for float64 logits above 709)
"""The softmax spelled out as exp / sum with the masked scores zeroed by a 0/1 mask, to show
how masking works. It never subtracts the row maximum, so large logits overflow to inf and NaN.

Style: 0/1 float masks multiplied into exp(scores), as in lecture notes.
"""
import math

import torch


def _masked_softmax(scores, keep):
    e = torch.exp(scores) * keep
    return e / e.sum(dim=-1, keepdim=True)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, D = target.shape
    S = memory.shape[1]
    tgt = (torch.arange(T, device=target.device) < target_lengths[:, None]).to(target.dtype)   # (B, T)
    mem = (torch.arange(S, device=target.device) < memory_lengths[:, None]).to(target.dtype)
    causal = torch.tril(torch.ones(T, T, dtype=target.dtype, device=target.device))
    a = _masked_softmax(target @ target.transpose(1, 2) / math.sqrt(D), causal * tgt[:, None, :])
    self_out = a @ target
    c = _masked_softmax(self_out @ memory.transpose(1, 2) / math.sqrt(D), mem[:, None, :])
    cross_out = c @ memory
    return self_out * tgt[..., None], cross_out * tgt[..., None]
