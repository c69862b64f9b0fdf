# expect: mask
"""A NumPy attention layer whose backward recomputes the softmax from the scores it saved before masking.

Source: modelled on the CMU 11-785 homework solutions (e.g. https://github.com/Yunfan-Wang/11785-CMU-
Deep-Learning-HW4, mytorch/nn/scaled_dot_product_attention.py, which keeps ``self.scaled_dot_product``
for the backward; no licence file), where the saved copy is taken one line too early. Adapted to the
task's function, masks, is_causal and scale=.
Bug: the probabilities used for dS come from the unmasked scores (normalised by the masked row sums),
so masked keys receive gradient through dQ and dK; dV uses the masked P and is right. Boolean masks,
float masks and is_causal all show it (one bug: the mask is not applied in the backward).
"""
import numpy as np
import torch


class ScaledDotProductAttention:
    def __init__(self, scale):
        self.scale = scale

    def forward(self, Q, K, V, additive):
        self.Q, self.K, self.V = Q, K, V
        scaled_dot_product = Q @ np.swapaxes(K, -1, -2) * self.scale
        self.scaled_dot_product = scaled_dot_product          # saved before the mask: the bug
        masked = scaled_dot_product + additive
        self.log_norm = np.log(np.exp(masked - masked.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
            + masked.max(-1, keepdims=True)
        self.attention_scores = np.exp(masked - self.log_norm)
        return self.attention_scores @ V

    def backward(self, d_output):
        A = self.attention_scores
        d_V = np.swapaxes(A, -1, -2) @ d_output
        d_A = d_output @ np.swapaxes(self.V, -1, -2)
        A_again = np.exp(self.scaled_dot_product - self.log_norm)  # recomputed for the Jacobian
        d_scaled = A_again * (d_A - (d_A * A).sum(-1, keepdims=True)) * self.scale
        return d_scaled @ self.K, np.swapaxes(d_scaled, -1, -2) @ self.Q, d_V


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    Q, K, V, dO = (t.detach().cpu().numpy() for t in (query, key, value, grad_out))
    L, S = Q.shape[-2], K.shape[-2]
    additive = np.zeros((L, S))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        additive = np.where(attn_mask.cpu().numpy(), 0.0, -np.inf)
    elif attn_mask is not None:
        additive = attn_mask.cpu().numpy()
    if is_causal:
        additive = np.where(np.tril(np.ones((L, S), dtype=bool)), additive, -np.inf)
    layer = ScaledDotProductAttention(1 / np.sqrt(Q.shape[-1]) if scale is None else scale)
    layer.forward(Q, K, V, additive)
    return tuple(torch.from_numpy(np.ascontiguousarray(d)).to(query.dtype) for d in layer.backward(dO))
