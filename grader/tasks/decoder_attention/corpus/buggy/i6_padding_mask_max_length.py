# expect: padding
"""A key mask for the memory from ``lengths_to_padding_mask``, sized by the longest memory sequence.

Source: https://github.com/rwth-i6/i6_experiments, users/berger/pytorch/models/util.py,
``lengths_to_padding_mask`` (``max_length = torch.max(lengths)``; ``arange(max_length) <
lengths.unsqueeze(1)``: "a pytorch MHSA compatible key mask"). Adapted: the helper's idea is
rewritten and used for the memory's key mask of the task's decoder layer; the target's mask is
built from T and is right.

The bug (issue 40): the memory mask is (B, max(memory_lengths)) wide. It fits the scores only when
some memory sequence is full length; when none is (padding.no_full_row) the function raises.
"""
import torch


def lengths_to_padding_mask(lengths):
    max_length = int(torch.max(lengths))
    return torch.arange(max_length, device=lengths.device).expand(len(lengths), max_length) < lengths.unsqueeze(1)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, D = target.shape
    real_t = torch.arange(T, device=target.device)[None, :] < target_lengths[:, None]   # (B, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=target.device).tril()
    scores = target @ target.transpose(1, 2) / D ** 0.5                                 # (B, T, T)
    scores = scores.masked_fill(~(real_t[:, None, :] & causal), float("-inf"))
    self_out = torch.nan_to_num(torch.softmax(scores, -1)) @ target
    key_mask = lengths_to_padding_mask(memory_lengths)                                  # (B, max S)
    cross = (self_out @ memory.transpose(1, 2) / D ** 0.5).masked_fill(~key_mask[:, None, :], float("-inf"))
    cross_out = torch.softmax(cross, -1) @ memory
    zero = real_t[:, :, None]
    return self_out * zero, cross_out * zero
