# expect: output
"""A NumPy attention layer that transposes the wrong operand for dQ (a shape error unless L = S).

Source: modelled on a CMU 11-785 attention homework solution in one of the public IDL-HW4
repositories (``mytorch/nn/scaled_dot_product_attention.py``; found by searching GitHub for
``self.eps = 1e10  # DO NOT MODIFY``; no licence file), whose backward puts ``np.swapaxes`` on the
wrong operand of the dQ and dK products. Adapted, not copied: one such slip is kept, the transposed
score gradient in dQ; the layer is the usual one (forward storing P, backward through its own
softmax layer), in the task's function with its masks, is_causal and scale=.
Bug: dQ = s·dSᵀ·K instead of s·dS·K: with L ≠ S the matrix product fails; with L = S it returns
numbers of the right shape and the wrong values. dK and dV are right.
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


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    Q, K, V, dO = (t.detach().cpu().numpy() for t in (query, key, value, grad_out))
    L, S = Q.shape[-2], K.shape[-2]
    s = 1 / np.sqrt(Q.shape[-1]) if scale is None else scale
    scores = Q @ np.swapaxes(K, -1, -2) * s
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask.cpu().numpy()
    elif attn_mask is not None:
        scores = np.where(attn_mask.cpu().numpy(), scores, -np.inf)
    if is_causal:
        scores = np.where(np.tril(np.ones((L, S), dtype=bool)), scores, -np.inf)
    softmax = Softmax()
    A = softmax.forward(scores)
    d_V = np.swapaxes(A, -1, -2) @ dO
    d_scaled = softmax.backward(dO @ np.swapaxes(V, -1, -2)) * s
    d_Q = np.swapaxes(d_scaled, -1, -2) @ K
    d_K = np.swapaxes(d_scaled, -1, -2) @ Q
    return tuple(torch.from_numpy(np.ascontiguousarray(d)).to(query.dtype) for d in (d_Q, d_K, d_V))
