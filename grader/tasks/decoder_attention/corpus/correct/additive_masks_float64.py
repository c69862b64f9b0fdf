"""Additive masks (0 / -inf), computed in float64 and cast back."""
import math

import torch


def padding_bias(lengths, n):
    real = torch.arange(n)[None, :] < lengths[:, None]
    return torch.zeros(real.shape, dtype=torch.float64).masked_fill(~real, float("-inf"))[:, None, :]


def attention(q, k, v, bias):
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]) + bias, dim=-1)
    return weights @ v


def decoder_attention(target, memory, target_lengths, memory_lengths):
    x, m = target.double(), memory.double()
    T, S = x.shape[1], m.shape[1]
    causal = torch.zeros(T, T, dtype=torch.float64).masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
    h = attention(x, x, x, padding_bias(target_lengths, T) + causal)
    c = attention(h, m, m, padding_bias(memory_lengths, S))
    keep = (torch.arange(T)[None, :, None] < target_lengths[:, None, None]).double()
    return (h * keep).to(target.dtype), (c * keep).to(target.dtype)
