# expect: scale
"""A NumPy attention backward that applies the 1/√d_k twice: once to dS, once more to dQ and dK.

Source: modelled on the CMU 11-785 homework solutions' backward (e.g.
https://github.com/Angelbidas/IDL-HW4, mytorch/nn/scaled_dot_product_attention.py, whose step
"Scale gradients by sqrt(d_k)" divides the score gradient once; no licence file), with a second
division left on the products, as happens when a derivation on paper is typed in twice. Adapted to
the task's function, masks, is_causal and scale=.
Bug: dQ and dK carry s² instead of s; dV is right.
"""
import numpy as np
import torch


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
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    A = e / e.sum(axis=-1, keepdims=True)
    d_V = np.swapaxes(A, -1, -2) @ dO
    d_A = dO @ np.swapaxes(V, -1, -2)
    d_scaled = A * (d_A - (d_A * A).sum(axis=-1, keepdims=True))
    d_scaled = d_scaled * s                          # "scale gradients by sqrt(d_k)"
    d_Q = d_scaled @ K * s
    d_K = np.swapaxes(d_scaled, -1, -2) @ Q * s
    return tuple(torch.from_numpy(np.ascontiguousarray(d)).to(query.dtype) for d in (d_Q, d_K, d_V))
