# expect: mask
"""A NumPy attention layer whose boolean mask subtracts only a tiny epsilon from the hidden scores.

Source: the CMU 11-785 attention homework as solved in https://github.com/puru-samal/IDL-HW4
(mytorch/nn/scaled_dot_product_attention.py: ``self.eps = 1e-4`` and
``scaled_dot_product + np.where(self.mask, -self.eps, 0)``; no licence file in the repository).
Adapted, not copied: the layer (forward storing P, backward through the softmax's own backward) is
wrapped in the task's function; the boolean mask (True = may attend) is inverted into the
homework's "True = ignore"; float masks are added; is_causal is handled apart with −inf, so the
epsilon mistake is the file's one bug.
Bug: subtracting 1e-4 leaves a hidden key's weight almost unchanged (the homework's 1e10 was meant),
so boolean masks have no effect, in the forward and in every gradient.
"""
import numpy as np
import torch


class Softmax:
    def forward(self, Z):
        e = np.exp(Z - Z.max(axis=-1, keepdims=True))
        self.A = e / e.sum(axis=-1, keepdims=True)
        return self.A

    def backward(self, dLdA):
        return self.A * (dLdA - (dLdA * self.A).sum(axis=-1, keepdims=True))


class ScaledDotProductAttention:
    def __init__(self, scale):
        self.softmax = Softmax()
        self.eps = 1e-4
        self.scale = scale

    def forward(self, Q, K, V, mask=None, additive=None):
        self.Q, self.K, self.V = Q, K, V
        scaled_dot_product = Q @ np.swapaxes(K, -1, -2) * self.scale
        if additive is not None:
            scaled_dot_product = scaled_dot_product + additive
        if mask is not None:
            scaled_dot_product = scaled_dot_product + np.where(mask, -self.eps, 0)
        self.attention_scores = self.softmax.forward(scaled_dot_product)
        return self.attention_scores @ V

    def backward(self, d_output):
        d_V = np.swapaxes(self.attention_scores, -1, -2) @ d_output
        d_scaled = self.softmax.backward(d_output @ np.swapaxes(self.V, -1, -2)) * self.scale
        return d_scaled @ self.K, np.swapaxes(d_scaled, -1, -2) @ self.Q, d_V


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    Q, K, V, dO = (t.detach().cpu().numpy() for t in (query, key, value, grad_out))
    L, S = Q.shape[-2], K.shape[-2]
    additive = None
    if is_causal:
        additive = np.where(np.triu(np.ones((L, S), dtype=bool), 1), -np.inf, 0.0)
    elif attn_mask is not None and attn_mask.dtype != torch.bool:
        additive = attn_mask.cpu().numpy()
    ignore = ~attn_mask.cpu().numpy() if attn_mask is not None and attn_mask.dtype == torch.bool else None
    layer = ScaledDotProductAttention(1 / np.sqrt(Q.shape[-1]) if scale is None else scale)
    layer.forward(Q, K, V, ignore, additive)
    return tuple(torch.from_numpy(np.ascontiguousarray(d)).to(query.dtype) for d in layer.backward(dO))
