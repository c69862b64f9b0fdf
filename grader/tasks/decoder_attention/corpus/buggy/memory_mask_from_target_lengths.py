# expect: padding
# bug: builds the memory's padding mask from target_lengths
"""A copy-paste slip between two nearly identical lines: the memory mask is made from the target's
lengths. Right only where both lengths agree.

Style: a make_pad_mask helper as speech toolkits write it (True = padding), masked_fill with -1e9.
"""
import math

import torch


def make_pad_mask(lengths, max_len):
    seq = torch.arange(max_len, device=lengths.device)
    return seq.unsqueeze(0) >= lengths.unsqueeze(1)


def _attend(q, k, v, ignore):
    w = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.size(-1))
    w = w.masked_fill(ignore, -1e9)
    return torch.bmm(torch.softmax(w, dim=-1), v)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T, S = target.size(1), memory.size(1)
    tgt_pad = make_pad_mask(target_lengths, T)
    mem_pad = make_pad_mask(target_lengths, S)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=target.device), 1)
    self_out = _attend(target, target, target, future[None] | tgt_pad[:, None, :])
    cross_out = _attend(self_out, memory, memory, mem_pad[:, None, :])
    zero = tgt_pad[:, :, None]
    return self_out.masked_fill(zero, 0), cross_out.masked_fill(zero, 0)
