# expect: jacobian
"""A softmax layer whose backward sums dP ⊙ P over the wrong axis.

Source: modelled on the ``Softmax.backward`` of the CMU 11-785 homework solutions (e.g.
https://github.com/Yunfan-Wang/11785-CMU-Deep-Learning-HW4, mytorch/nn/activation.py; no licence
file), which reduce along ``self.dim``: here the layer is built with dim=-2, the axis of the
(L, S) score matrix a student takes for "the rows". Adapted to the task's function, masks,
is_causal and scale=; the forward softmax is taken over the keys, as it must be.
Bug: rowsum(dP ⊙ P) is summed over the queries (dim=-2) instead of each row's keys, so dS (and
dQ, dK through it) is wrong; dV is right.
"""
import math

import torch


class Softmax:
    def __init__(self, dim):
        self.dim = dim

    def forward(self, Z):
        self.A = torch.softmax(Z, dim=-1)
        return self.A

    def backward(self, dLdA):
        dot = (dLdA * self.A).sum(dim=self.dim, keepdim=True)
        return self.A * (dLdA - dot)


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    s = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-1, -2) * s
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else scores + attn_mask
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    softmax = Softmax(dim=-2)
    A = softmax.forward(scores)
    d_scores = softmax.backward(grad_out @ value.transpose(-1, -2)) * s
    return d_scores @ key, d_scores.transpose(-1, -2) @ query, A.transpose(-1, -2) @ grad_out
