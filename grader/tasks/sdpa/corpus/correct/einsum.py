"""einsum with ellipsis batch dims; scale via torch.rsqrt; masks with torch.where."""
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    E = query.shape[-1]
    s = torch.rsqrt(torch.tensor(float(E), dtype=query.dtype)) if scale is None else scale
    scores = torch.einsum("...le,...se->...ls", query, key) * s  # (..., L, S)
    neg_inf = torch.tensor(float("-inf"), dtype=scores.dtype)
    if is_causal:
        L, S = scores.shape[-2:]
        allowed = torch.ones(L, S, dtype=torch.bool).tril()
        scores = torch.where(allowed, scores, neg_inf)
    elif attn_mask is not None:
        scores = torch.where(attn_mask, scores, neg_inf) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = scores.softmax(dim=-1)
    return torch.einsum("...ls,...sv->...lv", weights, value)
