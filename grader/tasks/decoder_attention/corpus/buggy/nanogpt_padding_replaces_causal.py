# expect: causal
"""nanoGPT's attention where the padding mask took the place of the causal bias.

Source: https://github.com/karpathy/nanoGPT (model.py, ``CausalSelfAttention.forward``'s slow path:
``att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))``), MIT licence. Adapted, not
copied: one head in the (B, nh, T, hs) layout, a cross-attention to the memory, padded rows zeroed;
the masked_fill line is given the padding mask instead of the bias (a padded batch needs a padding
mask, and it replaced the one line that masked anything).
Bug: the self-attention hides the padded keys but not the future: position i attends to every
real target position, not only 0..i.
"""
import math

import torch
from torch.nn import functional as F


def _attend(q, k, v, keep):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(keep == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    return att @ v


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, C = target.size()
    S = memory.size(1)
    x = target.view(B, T, 1, C).transpose(1, 2)
    m = memory.view(B, S, 1, C).transpose(1, 2)
    t_pad = (torch.arange(T)[None, :] < target_lengths[:, None])[:, None, None, :]   # (B, 1, 1, T)
    m_pad = (torch.arange(S)[None, :] < memory_lengths[:, None])[:, None, None, :]
    y = _attend(x, x, x, t_pad)
    z = _attend(y, m, m, m_pad)
    rows = t_pad.transpose(-2, -1)
    return (y * rows).transpose(1, 2).reshape(B, T, C), (z * rows).transpose(1, 2).reshape(B, T, C)
