"""Per-head projections by viewing each weight as (H, d_k, d_model) and using einsum."""
import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    H, dk = num_heads, D // num_heads
    q = torch.einsum("bld,hkd->bhlk", x_q, w_q.view(H, dk, D))   # (B, H, L, dk)
    k = torch.einsum("bsd,hkd->bhsk", x_kv, w_k.view(H, dk, D))  # (B, H, S, dk)
    v = torch.einsum("bsd,hkd->bhsk", x_kv, w_v.view(H, dk, D))  # (B, H, S, dk)
    scores = torch.einsum("bhlk,bhsk->bhls", q, k) * dk ** -0.5
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).tril().logical_not(), float("-inf"))
    elif attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    heads = torch.einsum("bhls,bhsk->bhlk", scores.softmax(-1), v)
    return torch.einsum("bhlk,dhk->bld", heads, w_o.view(D, H, dk))
