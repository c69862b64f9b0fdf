"""A NumPy attention layer whose backward calls its own softmax layer's backward (course homework style).

Source: the scaled dot-product attention homework of CMU 11-785 (Introduction to Deep Learning), as
solved in https://github.com/Yunfan-Wang/11785-CMU-Deep-Learning-HW4 (mytorch/nn/activation.py and
mytorch/nn/scaled_dot_product_attention.py; no licence file in the repository). Adapted, not copied:
the layer classes keep their shape (a ``Softmax`` layer with forward/backward, an attention layer
that stores what its backward needs and calls ``self.softmax.backward``), wrapped in the task's
function; the homework's mask (True = ignore, filled with -1e9) becomes the task's (True = may attend),
float masks are added, is_causal and scale= are honoured, and NumPy arrays go back to the inputs' dtype.
Why correct: dS = P ⊙ (dP − rowsum(dP ⊙ P)) is the softmax Jacobian-vector product; dQ = s·dS·K,
dK = s·dSᵀ·Q, dV = Pᵀ·dO. The method names (backward) are the file's own: no autograd runs.
"""
import numpy as np
import torch


class Softmax:
    def __init__(self, dim=-1):
        self.dim = dim

    def forward(self, Z):
        shifted = Z - Z.max(axis=self.dim, keepdims=True)
        e = np.exp(shifted)
        self.A = e / e.sum(axis=self.dim, keepdims=True)
        return self.A

    def backward(self, dLdA):
        dot = np.sum(dLdA * self.A, axis=self.dim, keepdims=True)
        return self.A * (dLdA - dot)


class ScaledDotProductAttention:
    def __init__(self, scale):
        self.scale = scale
        self.softmax = Softmax(dim=-1)

    def forward(self, Q, K, V, ignore=None, bias=None):
        self.Q, self.K, self.V = Q, K, V
        scores = Q @ np.swapaxes(K, -1, -2) * self.scale
        if bias is not None:
            scores = scores + bias
        if ignore is not None:
            scores = np.where(ignore, -1e9, scores)
        self.attention_scores = self.softmax.forward(scores)
        return self.attention_scores @ V

    def backward(self, d_output):
        d_V = np.swapaxes(self.attention_scores, -1, -2) @ d_output
        d_attention = d_output @ np.swapaxes(self.V, -1, -2)
        d_scores = self.softmax.backward(d_attention) * self.scale
        d_Q = d_scores @ self.K
        d_K = np.swapaxes(d_scores, -1, -2) @ self.Q
        return d_Q, d_K, d_V


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    q, k, v, g = (t.detach().cpu().numpy() for t in (query, key, value, grad_out))
    L, S = q.shape[-2], k.shape[-2]
    ignore, bias = None, None
    if is_causal:
        ignore = np.triu(np.ones((L, S), dtype=bool), k=1)
    elif attn_mask is not None and attn_mask.dtype == torch.bool:
        ignore = ~attn_mask.cpu().numpy()
    elif attn_mask is not None:
        bias = attn_mask.detach().cpu().numpy()
    layer = ScaledDotProductAttention(1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    layer.forward(q, k, v, ignore, bias)
    return tuple(torch.from_numpy(np.ascontiguousarray(d)).to(query.dtype) for d in layer.backward(g))
