"""The Annotated Transformer's attention() and its decoder masks, with the padding given as lengths.

Source: https://github.com/harvardnlp/annotated-transformer (the_annotated_transformer.py:
``subsequent_mask``, ``Batch.make_std_mask`` and ``attention``), MIT licence. Adapted, not copied:
the token-based masks ``(tgt != pad).unsqueeze(-2) & subsequent_mask(T)`` are built from the
lengths instead of a pad token; one head, no projections; the padded rows are zeroed at the end
(the original leaves them to the loss mask).
Why correct: subsequent_mask is ``triu(ones, 1) == 0``, i.e. tril, combined with the keys' padding
as a (B, 1, T) row broadcast over the queries; -1e9 where the mask is 0 gives those keys weight 0,
and no row is fully masked (key 0 is always real and visible).
"""
import math

import torch


def subsequent_mask(size):
    """(1, size, size): True where query i may see key j (j <= i)."""
    attn_shape = (1, size, size)
    future = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return future == 0


def attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T, S = target.size(1), memory.size(1)
    tgt_real = (torch.arange(T)[None, :] < target_lengths[:, None]).unsqueeze(-2)    # (B, 1, T)
    src_mask = (torch.arange(S)[None, :] < memory_lengths[:, None]).unsqueeze(-2)    # (B, 1, S)
    tgt_mask = tgt_real & subsequent_mask(T).type_as(tgt_real)                       # (B, T, T)
    x, _ = attention(target, target, target, tgt_mask)
    out, _ = attention(x, memory, memory, src_mask)
    rows = tgt_real.transpose(-2, -1).to(target.dtype)                               # (B, T, 1)
    return x * rows, out * rows
