# expect: dtype
# bugs: several (float32 biases make every float64 call raise, and most checks of this task call in float64: each is charged, since it could not check)
"""The scores computed with torch.baddbmm(bias, q, kᵀ, alpha=1/√D), as fused-attention code does to
add the mask in the same call. The biases are created without a dtype, so they are float32; baddbmm
does not promote, and every float64 call raises. float32 calls are right.
"""
import math

import torch


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, D = target.shape
    S = memory.shape[1]
    dev = target.device
    t_pad = torch.arange(T, device=dev)[None] >= target_lengths[:, None]
    m_pad = torch.arange(S, device=dev)[None] >= memory_lengths[:, None]
    future = torch.ones(T, T, dtype=torch.bool, device=dev).triu(1)
    self_bias = torch.zeros(B, T, T, device=dev).masked_fill(future[None] | t_pad[:, None, :], -1e9)
    cross_bias = torch.zeros(B, T, S, device=dev).masked_fill(m_pad[:, None, :].expand(B, T, S), -1e9)
    alpha = 1 / math.sqrt(D)
    self_out = torch.softmax(torch.baddbmm(self_bias, target, target.transpose(1, 2), alpha=alpha), -1) @ target
    cross_out = torch.softmax(torch.baddbmm(cross_bias, self_out, memory.transpose(1, 2), alpha=alpha), -1) @ memory
    keep = (~t_pad)[..., None]
    return self_out * keep, cross_out * keep
