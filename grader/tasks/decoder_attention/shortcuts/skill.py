"""The skill skipped: no masks at all (no padding mask, no causal mask, padded rows kept)."""
import math

import torch


def _attend(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v


def decoder_attention(target, memory, target_lengths, memory_lengths):
    self_out = _attend(target, target, target)
    return self_out, _attend(self_out, memory, memory)
