# expect: padding
"""A seq2seq transformer whose target padding mask is unsqueezed over the queries, reused for the memory.

Source: a variant of bentrevett/pytorch-seq2seq's ``make_trg_mask`` found in public course
repositories (``trg_pad_mask = (trg != self.trg_pad_idx).unsqueeze(1).unsqueeze(3)`` with the
comment ``# trg_pad_mask: [batch_size, 1, trg_len, 1]``; the tutorial itself has
``.unsqueeze(1).unsqueeze(2)``, [batch, 1, 1, trg len]), MIT licence (the tutorial's). Adapted, not
copied: one head, masks from the lengths; the cross-attention is given the same [batch, 1, trg len,
1] mask of the target's real positions (the source side built by the same helper); padded rows are
zeroed with it.
Bug: the padding mask covers the queries (rows), not the keys (columns): real queries still attend
to the padded memory positions, and padded query rows are masked whole.
"""
import math

import torch


def _attend(q, k, v, mask):
    energy = torch.matmul(q, k.permute(0, 1, 3, 2)) / math.sqrt(q.size(-1))
    energy = energy.masked_fill(mask == 0, -1e10)
    return torch.matmul(torch.softmax(energy, dim=-1), v)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T = target.size(1)
    trg_pad_mask = (torch.arange(T)[None, :] < target_lengths[:, None]).unsqueeze(1).unsqueeze(3)
    trg_sub_mask = torch.tril(torch.ones((T, T))).bool()
    trg_mask = trg_pad_mask & trg_sub_mask                                 # [batch, 1, trg len, trg len]
    x, m = target.unsqueeze(1), memory.unsqueeze(1)
    self_out = _attend(x, x, x, trg_mask)
    cross_out = _attend(self_out, m, m, trg_pad_mask)                      # [batch, 1, trg len, 1]
    rows = trg_pad_mask.squeeze(1)                                         # [batch, trg len, 1]
    return self_out.squeeze(1) * rows, cross_out.squeeze(1) * rows
