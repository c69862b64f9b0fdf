# expect: output
"""Ben Trevett's transformer attention with the softmax taken over dim=2 of the 4-D energy.

Source: https://github.com/bentrevett/pytorch-seq2seq ("6 - Attention is All You Need.ipynb":
``MultiHeadAttentionLayer.forward``, ``energy.masked_fill(mask == 0, -1e10)`` then
``torch.softmax(energy, dim = -1)``), MIT licence. Adapted, not copied: one head in the
(B, n_heads, len, head_dim) layout, masks from the lengths, padded rows zeroed; ``dim=2`` where the
tutorial has ``dim=-1`` (dim=2 is the key axis of a 3-D (B, T, S) energy, a usual slip when code
moves to the 4-D layout).
Bug: on [batch, heads, query len, key len] dim=2 is the queries: each key's column is normalised
over the queries instead of each query's row over the keys. A padded key's column is all -1e10,
so it gets equal weights.
"""
import math

import torch


def _attend(query, key, value, mask):
    energy = torch.matmul(query, key.permute(0, 1, 3, 2)) / math.sqrt(query.size(-1))
    energy = energy.masked_fill(mask == 0, -1e10)
    attention = torch.softmax(energy, dim=2)
    return torch.matmul(attention, value)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, D = target.shape
    S = memory.size(1)
    trg_pad_mask = (torch.arange(T)[None, :] < target_lengths[:, None]).unsqueeze(1).unsqueeze(2)
    trg_mask = trg_pad_mask & torch.tril(torch.ones((T, T))).bool()
    src_mask = (torch.arange(S)[None, :] < memory_lengths[:, None]).unsqueeze(1).unsqueeze(2)
    x, m = target.unsqueeze(1), memory.unsqueeze(1)                        # (B, 1, len, D)
    self_out = _attend(x, x, x, trg_mask)
    cross_out = _attend(self_out, m, m, src_mask)
    keep = trg_pad_mask.squeeze(1).transpose(1, 2)                         # (B, T, 1)
    return self_out.squeeze(1) * keep, cross_out.squeeze(1) * keep
