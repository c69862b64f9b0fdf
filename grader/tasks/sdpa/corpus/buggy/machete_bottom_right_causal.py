# expect: causal
"""A reference attention with a bottom-right causal mask and its softmax in float32.

Source: https://github.com/b-albar/machete, src/machete/utils/references/attention/attention_ref.py,
``attn_ref``: ``torch.where(ms + k.shape[2] - q.shape[2] >= ns, p, float("-inf"))`` and
``torch.softmax(p.float(), dim=-1).to(q.dtype)`` (licence not stated in the file). Adapted to the task's
signature (attn_mask, scale=, any leading dimensions); its debugging prints are left out.

The bug: the causal mask is aligned to the bottom-right (query i sees keys up to i + S − L, the
convention of KV-cache decoding); the task's is_causal is top-left, torch.ones(L, S).tril(). The two
agree when L = S and differ when L != S (causal.rectangular). The float32 softmax is fine.
"""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    sm_scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    p = torch.matmul(query, key.transpose(-2, -1)) * sm_scale          # (..., L, S)
    if attn_mask is not None:
        p = p.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else p + attn_mask
    if is_causal:
        L, S = query.size(-2), key.size(-2)
        ms = torch.arange(L, device=query.device).unsqueeze(-1)
        ns = torch.arange(S, device=query.device)
        p = torch.where(ms + S - L >= ns, p, float("-inf"))
    p = torch.softmax(p.float(), dim=-1).to(query.dtype)
    return torch.matmul(p, value)                                      # (..., L, Ev)
