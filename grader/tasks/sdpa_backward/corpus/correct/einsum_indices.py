import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = scale if scale is not None else query.shape[-1] ** -0.5
    logits = torch.einsum("...le,...se->...ls", query, key) * scale
    L, S = logits.shape[-2], logits.shape[-1]
    if is_causal:
        allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        logits = torch.where(allowed, logits, torch.full_like(logits, float("-inf")))
    elif attn_mask is not None and attn_mask.dtype == torch.bool:
        logits = torch.where(attn_mask, logits, torch.full_like(logits, float("-inf")))
    elif attn_mask is not None:
        logits = logits + attn_mask
    probs = logits.softmax(-1)
    dv = torch.einsum("...ls,...lv->...sv", probs, grad_out)
    dprobs = torch.einsum("...lv,...sv->...ls", grad_out, value)
    delta = torch.einsum("...ls,...ls->...l", dprobs, probs)
    dlogits = probs * (dprobs - delta[..., None])
    dq = torch.einsum("...ls,...se->...le", dlogits, key) * scale
    dk = torch.einsum("...ls,...le->...se", dlogits, query) * scale
    return dq, dk, dv
