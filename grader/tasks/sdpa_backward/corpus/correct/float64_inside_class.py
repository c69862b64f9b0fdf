import math

import torch


class _AttentionBackward:
    """Computes in float64 and hands back the inputs' dtype."""

    def __init__(self, scale):
        self.scale = scale

    def probabilities(self, q, k, attn_mask, is_causal):
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        if is_causal:
            L, S = scores.shape[-2:]
            scores = scores + torch.zeros(L, S, dtype=scores.dtype).masked_fill(
                ~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
            else:
                scores = scores + attn_mask.double()
        scores = scores - scores.amax(-1, keepdim=True)
        e = scores.exp()
        return e / e.sum(-1, keepdim=True)

    def __call__(self, q, k, v, g, attn_mask, is_causal):
        p = self.probabilities(q, k, attn_mask, is_causal)
        dv = torch.matmul(p.transpose(-1, -2), g)
        dp = torch.matmul(g, v.transpose(-1, -2))
        ds = p * dp - p * (p * dp).sum(-1, keepdim=True)
        return self.scale * torch.matmul(ds, k), self.scale * torch.matmul(ds.transpose(-1, -2), q), dv


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    grads = _AttentionBackward(scale)(query.double(), key.double(), value.double(), grad_out.double(),
                                      attn_mask, is_causal)
    return tuple(g.to(query.dtype) for g in grads)
