# expect: output
import math

import torch


def _attend(q, k, v, keep):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, _ = target.shape
    S = memory.size(1)
    target_real = torch.arange(T, device=target.device)[None, :] < target_lengths[:, None]   # (B, T)
    memory_real = torch.arange(S, device=target.device)[None, :] < memory_lengths[:, None]   # (B, S)
    causal = torch.ones(T, T, dtype=torch.bool, device=target.device).tril()
    self_out = _attend(target, target, target, causal & target_real[:, None, :])
    cross_out = _attend(target, memory, memory, memory_real[:, None, :])
    rows = target_real[:, :, None]
    return self_out * rows, cross_out * rows
