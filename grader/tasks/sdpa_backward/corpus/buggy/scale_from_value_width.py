# expect: scale
# bug: scales by 1/sqrt of the values' width instead of the keys'
"""The head size read from the wrong tensor: ``d = value.size(-1)``. Right whenever E = Ev, which is
what most tutorials use, so it goes unnoticed until the widths differ.

Style: einsum for every product, the scale kept as d ** -0.5.
"""
import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    d = value.size(-1)
    scale = d ** -0.5 if scale is None else scale
    s = torch.einsum("...ie,...je->...ij", query, key) * scale
    if is_causal:
        i = torch.arange(s.size(-2), device=s.device)[:, None]
        j = torch.arange(s.size(-1), device=s.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    p = s.softmax(-1)
    dv = torch.einsum("...ij,...id->...jd", p, grad_out)
    dp = torch.einsum("...id,...jd->...ij", grad_out, value)
    ds = p * (dp - torch.einsum("...ij,...ij->...i", p, dp)[..., None])
    dq = torch.einsum("...ij,...je->...ie", ds, key) * scale
    dk = torch.einsum("...ij,...ie->...je", ds, query) * scale
    return dq, dk, dv
