"""The reference solution with torch's built-in attention swapped in (attn-grader tasks validate: refused)."""
import torch
import torch.nn.functional as F


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, _ = target.shape
    S = memory.size(1)
    target_real = torch.arange(T)[None, :] < target_lengths[:, None]
    memory_real = torch.arange(S)[None, :] < memory_lengths[:, None]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    self_out = F.scaled_dot_product_attention(target, target, target, attn_mask=causal & target_real[:, None, :])
    cross_out = F.scaled_dot_product_attention(self_out, memory, memory, attn_mask=memory_real[:, None, :])
    rows = target_real[:, :, None]
    return self_out * rows, cross_out * rows
