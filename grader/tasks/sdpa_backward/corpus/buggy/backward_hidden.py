# expect: forbidden
"""Autograd reached only through names built at run time."""
import torch

_engine = getattr(torch, "auto" + "gr" + "ad")
_on = getattr(torch, "enable_" + "gr" + "ad")


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    with _on():
        leaves = [t.clone() for t in (query, key, value)]
        for t in leaves:
            setattr(t, "requires_" + "gr" + "ad", True)
        s = query.size(-1) ** -0.5 if scale is None else scale
        scores = leaves[0] @ leaves[1].transpose(-2, -1) * s
        if is_causal:
            L, S = scores.shape[-2:]
            scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                else scores + attn_mask
        out = torch.softmax(scores, -1) @ leaves[2]
        grads = getattr(_engine, "gr" + "ad")(out, leaves, grad_out)
    return tuple(g.detach() for g in grads)
