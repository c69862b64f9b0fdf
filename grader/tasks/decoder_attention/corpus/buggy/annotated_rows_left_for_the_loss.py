# expect: padding
"""The Annotated Transformer's decoder attention as it is: padded target rows are left to the loss mask.

Source: https://github.com/harvardnlp/annotated-transformer (the_annotated_transformer.py:
``attention``, ``subsequent_mask`` and ``Batch.make_std_mask``; the padded target positions are
only excluded later, by the loss's ``ntokens``), MIT licence. Adapted, not copied: masks from the
lengths, one head, no projections.
Bug: the contract wants both outputs zero at padded target positions (i >= target length); here
they hold attention over the real keys, as in the original, which never zeroes them.
"""
import math

import torch


def subsequent_mask(size):
    attn_shape = (1, size, size)
    return torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8) == 0


def attention(query, key, value, mask=None):
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.matmul(scores.softmax(dim=-1), value)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T, S = target.size(1), memory.size(1)
    tgt_mask = (torch.arange(T)[None, :] < target_lengths[:, None]).unsqueeze(-2)
    tgt_mask = tgt_mask & subsequent_mask(T).type_as(tgt_mask)
    src_mask = (torch.arange(S)[None, :] < memory_lengths[:, None]).unsqueeze(-2)
    x = attention(target, target, target, tgt_mask)
    return x, attention(x, memory, memory, src_mask)
