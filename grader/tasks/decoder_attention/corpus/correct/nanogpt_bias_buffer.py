"""nanoGPT's CausalSelfAttention (the slow path), with a padding mask and a cross-attention added.

Source: https://github.com/karpathy/nanoGPT (model.py: ``CausalSelfAttention`` registers
``bias = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)`` and
masks ``att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))``), MIT licence. Adapted, not
copied: no projections or dropout; one head in nanoGPT's (B, nh, T, hs) layout; the buffer is built
once for a block size and sliced; padding masks from the lengths; a non-causal cross-attention to
the memory; padded rows zeroed.
Why correct: the sliced buffer is tril(T, T); the padding is a (B, 1, 1, T) key mask; -inf gives
masked keys weight 0 and no row is fully masked; 1/√(k.size(-1)) with hs = D.
"""
import math

import torch
from torch.nn import functional as F


class CausalSelfAttention:
    def __init__(self, block_size=64):
        self.bias = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)

    def _attend(self, q, k, v, keep):
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~keep, float("-inf"))
        att = F.softmax(att, dim=-1)
        return att @ v                                                    # (B, nh, T, hs)

    def __call__(self, x, memory, t_len, m_len):
        B, T, C = x.size()
        S = memory.size(1)
        if T > self.bias.size(-1):
            self.__init__(T)
        q = k = v = x.view(B, T, 1, C).transpose(1, 2)                     # (B, nh=1, T, hs)
        kv = memory.view(B, S, 1, C).transpose(1, 2)
        t_pad = (torch.arange(T)[None, :] < t_len[:, None])[:, None, None, :]
        m_pad = (torch.arange(S)[None, :] < m_len[:, None])[:, None, None, :]
        y = self._attend(q, k, v, (self.bias[:, :, :T, :T] != 0) & t_pad)
        z = self._attend(y, kv, kv, m_pad)
        rows = t_pad.transpose(-2, -1)                                     # (B, 1, T, 1)
        y, z = y * rows, z * rows
        return y.transpose(1, 2).reshape(B, T, C), z.transpose(1, 2).reshape(B, T, C)


_layer = CausalSelfAttention()


def decoder_attention(target, memory, target_lengths, memory_lengths):
    return _layer(target, memory, target_lengths, memory_lengths)
