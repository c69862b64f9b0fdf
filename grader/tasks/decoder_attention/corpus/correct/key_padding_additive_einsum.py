"""PyTorch's key_padding_mask convention (True = padding, to be ignored) turned into additive
-inf biases, einsum for the products, a head axis of size 1 as multi-head code keeps it.

Style: (B, 1, T, D) tensors throughout, squeezed at the end; the causal bias built once with triu.
"""
import torch


def _pad_mask(lengths, size):
    return torch.arange(size, device=lengths.device).expand(len(lengths), size) >= lengths.unsqueeze(1)


def _attention(q, k, v, bias):
    logits = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5 + bias
    return torch.einsum("bhqk,bhkd->bhqd", logits.softmax(dim=-1), v)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, D = target.shape
    S = memory.shape[1]
    tgt_pad = _pad_mask(target_lengths, T)            # (B, T) True = padding
    mem_pad = _pad_mask(memory_lengths, S)
    ninf = float("-inf")
    causal_bias = torch.full((T, T), ninf, dtype=target.dtype, device=target.device).triu(1)
    self_bias = causal_bias + torch.zeros(B, 1, 1, T, dtype=target.dtype, device=target.device).masked_fill(
        tgt_pad[:, None, None, :], ninf)
    cross_bias = torch.zeros(B, 1, 1, S, dtype=target.dtype, device=target.device).masked_fill(
        mem_pad[:, None, None, :], ninf)
    x, mem = target.unsqueeze(1), memory.unsqueeze(1)
    self_out = _attention(x, x, x, self_bias)
    cross_out = _attention(self_out, mem, mem, cross_bias)
    keep = (~tgt_pad)[:, None, :, None].to(target.dtype)
    return (self_out * keep).squeeze(1), (cross_out * keep).squeeze(1)
