# expect: causal
"""The Annotated Transformer's decoder masks with subsequent_mask's comparison flipped.

Source: https://github.com/harvardnlp/annotated-transformer (the_annotated_transformer.py:
``subsequent_mask`` returns ``torch.triu(torch.ones(attn_shape), diagonal=1) == 0``; ``attention``
fills ``mask == 0`` with -1e9), MIT licence. Adapted, not copied: masks from the lengths, one head,
padded rows zeroed; ``== 1`` where the original has ``== 0``, a slip seen in many re-typed copies.
Bug: the "subsequent" mask keeps j > i (the strict future) and hides the past and the diagonal: the
causal mask is inverted. The last real position of every sequence sees nothing, so -1e9 everywhere
gives it equal weights on all keys.
"""
import math

import torch


def subsequent_mask(size):
    attn_shape = (1, size, size)
    future = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return future == 1


def attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.matmul(scores.softmax(dim=-1), value)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T, S = target.size(1), memory.size(1)
    tgt_real = (torch.arange(T)[None, :] < target_lengths[:, None]).unsqueeze(-2)    # (B, 1, T)
    src_mask = (torch.arange(S)[None, :] < memory_lengths[:, None]).unsqueeze(-2)
    tgt_mask = tgt_real & subsequent_mask(T).type_as(tgt_real)
    x = attention(target, target, target, tgt_mask)
    out = attention(x, memory, memory, src_mask)
    rows = tgt_real.transpose(-2, -1).to(target.dtype)
    return x * rows, out * rows
