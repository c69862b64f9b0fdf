"""One sequence at a time: each batch element cut to its real lengths, attended without padding
masks at all, and written back into zero-filled outputs.

Style: the loop a reader writes to be sure of the masks before vectorising; only the causal
triangle is needed, since the slices hold no padding.
"""
import math

import torch
import torch.nn.functional as F


def decoder_attention(target, memory, target_lengths, memory_lengths):
    self_out = torch.zeros_like(target)
    cross_out = torch.zeros_like(target)
    for b in range(target.size(0)):
        t, s = int(target_lengths[b]), int(memory_lengths[b])
        x, mem = target[b, :t], memory[b, :s]
        scores = x @ x.T / math.sqrt(x.size(-1))
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        h = F.softmax(scores.masked_fill(future, -math.inf), dim=-1) @ x
        c = F.softmax(h @ mem.T / math.sqrt(x.size(-1)), dim=-1) @ mem
        self_out[b, :t], cross_out[b, :t] = h, c
    return self_out, cross_out
