# expect: stability
"""A NumPy softmax layer whose backward builds each row's Jacobian element by element (course homework style).

Source: the CMU 11-785 (Introduction to Deep Learning) attention homework as solved in
https://github.com/BojunLi03/11485-HW4 (mytorch/nn/activation.py, mytorch/nn/scaled_dot_product_attention.py;
no licence file in the repository). Adapted, not copied: the structure is kept (a forward that
exponentiates without subtracting the maximum, a backward that reshapes to rows and fills an S × S
Jacobian with two Python loops per row, then multiplies), wrapped in the task's function with the
task's masks, is_causal and scale=, NumPy converted back to the inputs' dtype.
The bug (issue 40: it scored 100 while no case drew its input): the forward exponentiates without
subtracting the row maximum, so float64 scores above 709 overflow to inf and the gradients to NaN
(stability.large_scores). Otherwise right: J[m, n] = a_m(δ_mn − a_n) is the softmax Jacobian and
dLdZ = dLdA · J; masked scores are shifted by −1e10, so exp() gives exactly 0 there. Slow (S² Python
steps per row), but a backward: it passes grad.at_scale (0.08 s at B·H = 8, L = S = 24, E = 512), where finite differences need minutes.
"""
import numpy as np
import torch


class Softmax:
    def __init__(self, dim=-1):
        self.dim = dim

    def forward(self, Z):
        self.A = np.exp(Z)
        self.A /= np.sum(self.A, axis=self.dim, keepdims=True)
        return self.A

    def backward(self, dLdA):
        shape = self.A.shape
        C = shape[-1]
        A = self.A.reshape(-1, C)
        dLdA = dLdA.reshape(-1, C)
        dLdZ = np.zeros_like(A)
        for i in range(A.shape[0]):
            J = np.zeros((C, C))
            for m in range(C):
                for n in range(C):
                    J[m, n] = A[i, m] * (1 - A[i, n]) if m == n else -A[i, m] * A[i, n]
            dLdZ[i, :] = dLdA[i, :] @ J
        return dLdZ.reshape(shape)


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    Q, K, V, dO = (t.detach().cpu().numpy().astype(np.float64) for t in (query, key, value, grad_out))
    L, S = Q.shape[-2], K.shape[-2]
    s = 1 / np.sqrt(Q.shape[-1]) if scale is None else scale
    scores = Q @ np.swapaxes(K, -2, -1) * s
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask.cpu().numpy()
    ignore = np.triu(np.ones((L, S), dtype=bool), 1) if is_causal else (
        ~attn_mask.cpu().numpy() if attn_mask is not None and attn_mask.dtype == torch.bool else None)
    if ignore is not None:
        scores = np.where(ignore, scores - 1e10, scores)
    scores = np.where(np.isneginf(scores), -1e10, scores)   # a float mask's -inf: exp() must give 0, not nan
    softmax = Softmax(dim=-1)
    A = softmax.forward(scores)
    d_V = np.swapaxes(A, -2, -1) @ dO
    d_scores = softmax.backward(dO @ np.swapaxes(V, -2, -1)) * s
    d_Q = d_scores @ K
    d_K = np.swapaxes(d_scores, -2, -1) @ Q
    return tuple(torch.from_numpy(np.ascontiguousarray(d)).to(query.dtype) for d in (d_Q, d_K, d_V))
