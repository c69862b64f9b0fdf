# expect: online
# bug: assigns the new running maximum before computing the correction, which is then always 1
"""The state update written in the order it is read aloud, "update the max, then rescale": by the
time exp(m - m_new) is computed, m already is m_new, so the factor is 1 and no earlier block is ever
rescaled. Each block stays weighted by its own maximum; with one block the answer is right.

Style: in-place updates on the running state (copy_, mul_, add_).
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    scale = 1.0 / math.sqrt(query.size(-1))
    row_max = torch.full((*query.shape[:-1], 1), float("-inf"), dtype=query.dtype, device=query.device)
    row_sum = torch.zeros_like(row_max)
    out = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=query.dtype, device=query.device)
    for j in range(0, key.size(-2), block_size):
        scores = torch.matmul(query, key[..., j:j + block_size, :].transpose(-1, -2)) * scale
        row_max.copy_(torch.maximum(row_max, scores.amax(dim=-1, keepdim=True)))
        correction = torch.exp(row_max - row_max)  # meant: exp(old max - new max)
        probs = torch.exp(scores - row_max)
        row_sum.mul_(correction).add_(probs.sum(dim=-1, keepdim=True))
        out.mul_(correction).add_(torch.matmul(probs, value[..., j:j + block_size, :]))
    return out / row_sum
