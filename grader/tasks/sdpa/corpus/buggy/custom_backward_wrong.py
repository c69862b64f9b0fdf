# expect: grad
# bug: a custom autograd.Function with a wrong backward
import math

import torch


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale):
        w = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
        ctx.save_for_backward(q, k, v, w)
        return w @ v

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, w = ctx.saved_tensors
        grad_v = w.transpose(-2, -1) @ grad_out
        grad_w = grad_out @ v.transpose(-2, -1)
        grad_s = w * (grad_w - (grad_w * w).sum(-1, keepdim=True))
        # forgets that the scores were multiplied by the scale
        return grad_s @ k, grad_s.transpose(-2, -1) @ q, grad_v, None


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    if attn_mask is not None or is_causal:
        L, S = query.size(-2), key.size(-2)
        s = query @ key.transpose(-2, -1) * (1 / math.sqrt(query.size(-1)) if scale is None else scale)
        keep = torch.ones(L, S, dtype=torch.bool).tril() if is_causal else attn_mask
        s = s.masked_fill(~keep, float("-inf")) if keep.dtype == torch.bool else s + keep
        return torch.softmax(s, -1) @ value
    return _Attention.apply(query, key, value, 1 / math.sqrt(query.size(-1)) if scale is None else scale)
