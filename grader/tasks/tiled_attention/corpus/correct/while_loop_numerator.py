"""A while loop over the keys with numerator and denominator named as in the "online softmax" note:
numerator Σ exp(s - m) v and denominator Σ exp(s - m), both rescaled whenever the maximum grows.

Style: shapes flattened to (rows, L, E) with reshape and restored with view; exp via torch.exp on
differences clamped by the running max.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    *lead, L, E = query.shape
    S, Ev = key.shape[-2], value.shape[-1]
    q = query.reshape(-1, L, E) / math.sqrt(E)
    k = key.reshape(-1, S, E)
    v = value.reshape(-1, S, Ev)
    running_max = q.new_full((q.shape[0], L, 1), float("-inf"))
    numerator = q.new_zeros((q.shape[0], L, Ev))
    denominator = q.new_zeros((q.shape[0], L, 1))
    start = 0
    while start < S:
        stop = min(start + block_size, S)
        scores = torch.bmm(q, k[:, start:stop].transpose(1, 2))
        block_max = scores.amax(dim=2, keepdim=True)
        new_max = torch.where(block_max > running_max, block_max, running_max)
        shrink = torch.exp(running_max - new_max)
        weights = torch.exp(scores - new_max)
        numerator = numerator * shrink + torch.bmm(weights, v[:, start:stop])
        denominator = denominator * shrink + weights.sum(dim=2, keepdim=True)
        running_max = new_max
        start = stop
    return (numerator / denominator).view(*lead, L, Ev)
