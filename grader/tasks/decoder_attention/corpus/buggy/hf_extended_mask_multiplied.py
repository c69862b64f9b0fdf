# expect: padding
"""BERT-style extended attention mask, (1 - mask) * -10000, multiplied into the scores.

Source: https://github.com/huggingface/transformers (modeling_utils.py
``get_extended_attention_mask``: ``extended_attention_mask = (1.0 - extended_attention_mask) *
-10000.0`` in the v2-v4 releases, for decoders ``causal_mask * attention_mask`` first; models then
do ``attention_scores = attention_scores + attention_mask``), Apache-2.0 licence. Adapted, not
copied: one head, no projections, masks from the lengths, padded rows zeroed; the additive mask is
multiplied where the original adds it.
Bug: scores * mask: real keys get score 0 (×0) and hidden ones ±10000·score, so the softmax puts
nearly all weight on the hidden key with the most negative score. An additive mask must be added.
"""
import math

import torch


def get_extended_attention_mask(attention_mask, dtype):
    return (1.0 - attention_mask.to(dtype)) * -10000.0


def _attention(hidden, context, attention_mask):
    scores = torch.matmul(hidden, context.transpose(-1, -2)) / math.sqrt(hidden.size(-1))
    scores = scores * attention_mask
    probs = torch.nn.functional.softmax(scores, dim=-1)
    return torch.matmul(probs, context)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, _ = target.shape
    S = memory.size(1)
    dec_mask = (torch.arange(T)[None, :] < target_lengths[:, None]).long()               # (B, T)
    enc_mask = (torch.arange(S)[None, :] < memory_lengths[:, None]).long()
    seq_ids = torch.arange(T)
    causal_mask = (seq_ids[None, None, :].repeat(B, T, 1) <= seq_ids[None, :, None]).long()
    self_mask = get_extended_attention_mask(causal_mask * dec_mask[:, None, :], target.dtype)
    cross_mask = get_extended_attention_mask(enc_mask[:, None, :], target.dtype)
    hidden = _attention(target, target, self_mask)
    cross = _attention(hidden, memory, cross_mask)
    rows = dec_mask[:, :, None].to(target.dtype)
    return hidden * rows, cross * rows
