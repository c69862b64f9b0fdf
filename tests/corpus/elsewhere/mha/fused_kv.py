"""Fuses the key and value projections into one matmul and splits heads with unflatten/permute."""
import torch
import torch.nn.functional as F


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    q = F.linear(x_q, w_q).unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)        # (B, H, L, dk)
    k, v = F.linear(x_kv, torch.cat([w_k, w_v])).chunk(2, dim=-1)                    # (B, S, D) each
    k = k.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)
    v = v.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)
    logits = torch.einsum("bhld,bhsd->bhls", q, k) / q.shape[-1] ** 0.5
    if is_causal:
        keep = torch.ones(logits.shape[-2:], dtype=torch.bool).tril()
        logits = logits.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        logits = logits.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else logits + attn_mask
    out = torch.einsum("bhls,bhsd->bhld", logits.softmax(-1), v)
    return F.linear(out.permute(0, 2, 1, 3).flatten(2), w_o)
