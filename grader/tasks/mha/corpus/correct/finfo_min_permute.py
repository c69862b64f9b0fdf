"""Multi-head attention with permute for the head split, a boolean mask filled with the dtype's
most negative finite value (finfo.min) instead of -inf, and reshape for the merge.

Style: as in transformer libraries that avoid -inf so that no row ever turns NaN.
"""
import math

import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    bsz, tgt_len, embed_dim = x_q.shape
    src_len = x_kv.shape[1]
    head_dim = embed_dim // num_heads
    q = torch.matmul(x_q, w_q.t()).reshape(bsz, tgt_len, num_heads, head_dim).permute(0, 2, 1, 3)
    k = torch.matmul(x_kv, w_k.t()).reshape(bsz, src_len, num_heads, head_dim).permute(0, 2, 3, 1)
    v = torch.matmul(x_kv, w_v.t()).reshape(bsz, src_len, num_heads, head_dim).permute(0, 2, 1, 3)
    attn_weights = torch.matmul(q, k) / math.sqrt(head_dim)          # k is already (B, H, d, S)
    min_value = torch.finfo(attn_weights.dtype).min
    if is_causal:
        keep = torch.tril(torch.ones(tgt_len, src_len, dtype=torch.bool, device=x_q.device))
        attn_weights = attn_weights.masked_fill(~keep, min_value)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_weights = attn_weights.masked_fill(~attn_mask, min_value)
        else:
            attn_weights = attn_weights + attn_mask
    attn_output = torch.matmul(torch.softmax(attn_weights, dim=-1), v)
    attn_output = attn_output.permute(0, 2, 1, 3).reshape(bsz, tgt_len, embed_dim)
    return torch.matmul(attn_output, w_o.t())
