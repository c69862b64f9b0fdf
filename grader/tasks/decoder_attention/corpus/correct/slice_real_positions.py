"""No masks for the padding at all: each sequence is cut to its real length."""
import math

import torch


def _attention(q, k, v, causal=False):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def decoder_attention(target, memory, target_lengths, memory_lengths):
    self_out = torch.zeros_like(target)
    cross_out = torch.zeros_like(target)
    for b in range(target.shape[0]):
        t, s = int(target_lengths[b]), int(memory_lengths[b])
        x, m = target[b, :t], memory[b, :s]
        h = _attention(x, x, x, causal=True)
        self_out[b, :t] = h
        cross_out[b, :t] = _attention(h, m, m)
    return self_out, cross_out
