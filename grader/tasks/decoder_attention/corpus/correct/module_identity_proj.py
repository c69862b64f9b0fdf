"""A tutorial decoder layer as an nn.Module: ``self.proj = nn.Identity()`` where the projections
would go, its own method named scaled_dot_product_attention, masks filled with finfo.min.

Style: the widely copied "attention from scratch" layout; masks (B, 1, T) broadcast over the
queries, padded target rows zeroed with masked_fill at the end.
"""
import math

import torch
from torch import nn


class DecoderAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Identity()

    def scaled_dot_product_attention(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    def forward(self, target, memory, target_lengths, memory_lengths):
        T, S = target.size(1), memory.size(1)
        tgt_keep = (torch.arange(T, device=target.device)[None, :] < target_lengths[:, None]).unsqueeze(1)
        mem_keep = (torch.arange(S, device=memory.device)[None, :] < memory_lengths[:, None]).unsqueeze(1)
        subsequent = torch.tril(torch.ones(1, T, T, dtype=torch.bool, device=target.device))
        x = self.proj(target)
        self_out = self.scaled_dot_product_attention(x, x, x, tgt_keep & subsequent)
        cross_out = self.scaled_dot_product_attention(self_out, memory, memory, mem_keep)
        pad_rows = ~tgt_keep.transpose(1, 2)  # (B, T, 1)
        return self_out.masked_fill(pad_rows, 0.0), cross_out.masked_fill(pad_rows, 0.0)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    return DecoderAttention()(target, memory, target_lengths, memory_lengths)
