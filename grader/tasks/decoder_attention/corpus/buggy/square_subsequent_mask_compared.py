# expect: padding
"""nn.Transformer's additive square subsequent mask, plus an additive padding mask, used with mask == 0.

Source: https://github.com/pytorch/pytorch (torch/nn/modules/transformer.py:
``Transformer.generate_square_subsequent_mask`` = ``torch.triu(torch.full((sz, sz),
float('-inf')), diagonal=1)``, a float mask meant to be ADDED to the scores), BSD-3-Clause licence.
Adapted, not copied: a padding mask of the same kind (0 / -inf) is added to it, and the hand-written
attention hides the keys with ``masked_fill(mask == 0, float('-inf'))``, as one does with a 0/1
mask; one head, padded rows zeroed.
Bug: an additive mask is 0 where a key MAY be attended, so ``mask == 0`` hides exactly the keys
that should be seen and keeps the masked ones; rows with nothing left are NaN.
"""
import math

import torch


def generate_square_subsequent_mask(sz, dtype):
    return torch.triu(torch.full((sz, sz), float("-inf"), dtype=dtype), diagonal=1)


def padding_mask(lengths, n, dtype):
    pad = torch.arange(n)[None, :] >= lengths[:, None]
    return torch.zeros(pad.shape, dtype=dtype).masked_fill(pad, float("-inf"))[:, None, :]   # (B, 1, n)


def _attention(q, kv, mask):
    scores = q @ kv.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(mask == 0, float("-inf"))
    return torch.softmax(scores, dim=-1) @ kv


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T, S, dtype = target.size(1), memory.size(1), target.dtype
    tgt_mask = generate_square_subsequent_mask(T, dtype) + padding_mask(target_lengths, T, dtype)
    memory_mask = padding_mask(memory_lengths, S, dtype).expand(-1, T, S)
    x = _attention(target, target, tgt_mask)
    y = _attention(x, memory, memory_mask)
    real = (torch.arange(T)[None, :] < target_lengths[:, None])[:, :, None]
    zero = torch.zeros((), dtype=dtype)
    return torch.where(real, x, zero), torch.where(real, y, zero)
