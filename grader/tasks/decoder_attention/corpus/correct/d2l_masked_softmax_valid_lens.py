"""Dive into Deep Learning's masked_softmax with per-query valid lengths, as its Transformer decoder uses it.

Source: https://github.com/d2l-ai/d2l-en (chapter_attention-mechanisms-and-transformers:
``sequence_mask``, ``masked_softmax``, ``DotProductAttention``; the Transformer decoder block's
``dec_valid_lens = torch.arange(1, num_steps + 1).repeat(batch_size, 1)`` for the causal mask);
sample code under the MIT-0 licence (LICENSE-SAMPLECODE). Adapted, not copied: the decoder's valid
lengths are min(i + 1, target length) per query, so one 2-D valid_lens gives the causal mask and the
padding at once; the memory's lengths are the cross-attention's 1-D valid_lens; the masked entries
get -1e6; padded rows zeroed.
Why correct: query i may see keys j < min(i + 1, length), i.e. j <= i and j real; the padded keys
of the memory are j >= memory length; exp(-1e6 - max) is 0 and every valid length is >= 1.
"""
import math

import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    """Perform softmax operation by masking elements on the last axis."""
    # X: 3D tensor, valid_lens: 1D or 2D tensor
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


def dot_product_attention(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    attention_weights = masked_softmax(scores, valid_lens)
    return torch.bmm(attention_weights, values)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    batch_size, num_steps, _ = target.shape
    dec_valid_lens = torch.arange(1, num_steps + 1).repeat(batch_size, 1)            # (B, T)
    dec_valid_lens = torch.minimum(dec_valid_lens, target_lengths[:, None])
    self_out = dot_product_attention(target, target, target, dec_valid_lens)
    cross_out = dot_product_attention(self_out, memory, memory, memory_lengths)
    real = (torch.arange(num_steps)[None, :] < target_lengths[:, None]).unsqueeze(-1)
    return self_out * real, cross_out * real
