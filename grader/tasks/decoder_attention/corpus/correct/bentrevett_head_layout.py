"""The attention of Ben Trevett's "Attention is All You Need" seq2seq tutorial, one head in its layout.

Source: https://github.com/bentrevett/pytorch-seq2seq ("6 - Attention is All You Need.ipynb":
``MultiHeadAttentionLayer.forward`` and ``Seq2Seq.make_src_mask`` / ``make_trg_mask``), MIT licence.
Adapted, not copied: no projections or dropout, one head (n_heads = 1, head_dim = D) kept in the
tutorial's (B, n_heads, len, head_dim) layout; masks from the lengths instead of pad tokens; the
scale is math.sqrt(head_dim) (the tutorial's float32 tensor would round √D for float64 inputs);
padded rows zeroed at the end.
Why correct: the (B, 1, 1, T) padding mask & tril(T, T) is the decoder's self-attention mask, the
(B, 1, 1, S) source mask the cross-attention's; masked energies are -1e10 (weight 0), no row is
fully masked, and the head axis of size 1 is squeezed back out.
"""
import math

import torch


def _attend(query, key, value, mask, head_dim):
    # query = [batch size, n heads, query len, head dim]
    energy = torch.matmul(query, key.permute(0, 1, 3, 2)) / math.sqrt(head_dim)
    energy = energy.masked_fill(mask == 0, -1e10)
    attention = torch.softmax(energy, dim=-1)          # [batch size, n heads, query len, key len]
    return torch.matmul(attention, value)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    batch_size, trg_len, hid_dim = target.shape
    src_len = memory.size(1)
    n_heads, head_dim = 1, hid_dim
    trg_pad_mask = (torch.arange(trg_len)[None, :] < target_lengths[:, None]).unsqueeze(1).unsqueeze(2)
    trg_sub_mask = torch.tril(torch.ones((trg_len, trg_len))).bool()
    trg_mask = trg_pad_mask & trg_sub_mask                                  # [batch, 1, trg len, trg len]
    src_mask = (torch.arange(src_len)[None, :] < memory_lengths[:, None]).unsqueeze(1).unsqueeze(2)

    def heads(x):
        return x.view(batch_size, -1, n_heads, head_dim).permute(0, 2, 1, 3)

    def merge(x):
        return x.permute(0, 2, 1, 3).contiguous().view(batch_size, -1, hid_dim)

    self_out = merge(_attend(heads(target), heads(target), heads(target), trg_mask, head_dim))
    cross_out = merge(_attend(heads(self_out), heads(memory), heads(memory), src_mask, head_dim))
    keep = trg_pad_mask.squeeze(1).squeeze(1).unsqueeze(-1)                # [batch, trg len, 1]
    return self_out.masked_fill(~keep, 0.0), cross_out.masked_fill(~keep, 0.0)
