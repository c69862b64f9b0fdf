"""Each projection's weight viewed per head, (H, d_k, d_model), and every product written as an
einsum: no split or merge of activations at all.

Style: the "einsum is all you need" layout; the output projection's weight viewed as
(d_model, H, d_k) so that the merge and w_o are one contraction.
"""
import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    d_model = x_q.shape[-1]
    d_k = d_model // num_heads
    wq = w_q.reshape(num_heads, d_k, d_model)
    wk = w_k.reshape(num_heads, d_k, d_model)
    wv = w_v.reshape(num_heads, d_k, d_model)
    wo = w_o.reshape(d_model, num_heads, d_k)
    q = torch.einsum("bld,hkd->bhlk", x_q, wq)
    k = torch.einsum("bsd,hkd->bhsk", x_kv, wk)
    v = torch.einsum("bsd,hkd->bhsk", x_kv, wv)
    logits = torch.einsum("bhlk,bhsk->bhls", q, k) * d_k ** -0.5
    if is_causal:
        L, S = logits.shape[-2:]
        logits = logits.masked_fill(torch.ones(L, S, dtype=torch.bool, device=logits.device).triu(1), -torch.inf)
    if attn_mask is not None:
        logits = logits.masked_fill(~attn_mask, -torch.inf) if attn_mask.dtype == torch.bool else logits + attn_mask
    heads = torch.einsum("bhls,bhsk->bhlk", logits.softmax(-1), v)
    return torch.einsum("bhlk,ehk->ble", heads, wo)
