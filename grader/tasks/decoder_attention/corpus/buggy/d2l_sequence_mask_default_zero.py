# expect: padding
"""d2l's masked_softmax calling sequence_mask with its default value, 0.

Source: https://github.com/d2l-ai/d2l-en (chapter_attention-mechanisms-and-transformers:
``sequence_mask(X, valid_len, value=0)`` and ``masked_softmax``, which passes ``value=-1e6``),
sample code under the MIT-0 licence (LICENSE-SAMPLECODE). Adapted, not copied: per-query valid
lengths min(i + 1, length) give the causal mask and the target's padding, the memory's lengths the
cross-attention's; padded rows zeroed; ``value=-1e6`` left out, so the default 0 is used.
Bug: the masked scores are set to 0 instead of a large negative number: future and padded keys
keep exp(0 - max) of weight.
"""
import math

import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


def dot_product_attention(queries, keys, values, valid_lens):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    batch_size, num_steps, _ = target.shape
    dec_valid_lens = torch.minimum(torch.arange(1, num_steps + 1).repeat(batch_size, 1), target_lengths[:, None])
    self_out = dot_product_attention(target, target, target, dec_valid_lens)
    cross_out = dot_product_attention(self_out, memory, memory, memory_lengths)
    real = (torch.arange(num_steps)[None, :] < target_lengths[:, None]).unsqueeze(-1)
    return self_out * real, cross_out * real
