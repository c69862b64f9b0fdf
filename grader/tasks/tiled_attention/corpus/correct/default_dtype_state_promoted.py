"""Running statistics allocated with torch.full / torch.zeros without a dtype (float32 by default),
as quick scripts do. Harmless: torch.maximum promotes the first block's maximum to the scores'
dtype, and every later value follows, so float64 inputs keep float64 state from the first block on.

Style: einsum for every product, including the per-row rescale; (…, L) state without a trailing 1.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    rows = query.shape[:-1]
    m = torch.full(rows, float("-inf"), device=query.device)
    l = torch.zeros(rows, device=query.device)
    acc = torch.zeros(*rows, value.shape[-1], dtype=query.dtype, device=query.device)
    for j in range(0, key.shape[-2], block_size):
        s = torch.einsum("...qd,...kd->...qk", query, key[..., j:j + block_size, :]) / math.sqrt(query.shape[-1])
        m_new = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - m_new[..., None])
        alpha = torch.exp(m - m_new)
        l = alpha * l + p.sum(-1)
        acc = torch.einsum("...q,...qd->...qd", alpha, acc) + torch.einsum("...qk,...kd->...qd", p,
                                                                           value[..., j:j + block_size, :])
        m = m_new
    return acc / l[..., None]
