# expect: jacobian
"""A softmax backward that keeps only the diagonal of the Jacobian, z(1 − z), as for a sigmoid.

Source: the derivation in the comments of https://github.com/jeffdshen/ml-kata, kata8/softmax.py
(dz_i/dx_i = z_i(1 − z_i), dz_i/dx_j = −z_i·z_j; no licence file), where the code goes on to use both
terms. This file is the common mistake of stopping at the first: written in the style of the
NumPy-from-scratch attention layers of the CMU 11-785 homework (a Softmax layer with its own
backward), adapted to the task's function, masks, is_causal and scale=.
Bug: dS = P ⊙ (1 − P) ⊙ dP drops the off-diagonal terms −p_i·p_j of each row's Jacobian; dV is right.
"""
import numpy as np
import torch


class Softmax:
    def forward(self, Z):
        e = np.exp(Z - Z.max(axis=-1, keepdims=True))
        self.A = e / e.sum(axis=-1, keepdims=True)
        return self.A

    def backward(self, dLdA):
        return dLdA * self.A * (1 - self.A)


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
    d_scores = softmax.backward(dO @ np.swapaxes(V, -1, -2)) * s
    grads = (d_scores @ K, np.swapaxes(d_scores, -1, -2) @ Q, d_V)
    return tuple(torch.from_numpy(np.ascontiguousarray(d)).to(query.dtype) for d in grads)
