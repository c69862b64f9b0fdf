"""The reference attention every grade is measured against.

Written as plain tensor code that follows the chapter's formula,
Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, with the calling convention of
``torch.nn.functional.scaled_dot_product_attention``. It never calls torch's
fused attention, so it is the same readable math on every device and dtype.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _masked_scores(query: Tensor, key: Tensor, attn_mask: Tensor | None,
                   is_causal: bool, scale: float | None) -> Tensor:
    """Scaled, masked logits of shape (..., L, S)."""
    if attn_mask is not None and is_causal:
        raise ValueError("give either attn_mask or is_causal=True, not both")
    L, S, E = query.size(-2), key.size(-2), query.size(-1)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., L, S)

    if is_causal:
        # Top-left aligned: query i sees keys 0..i, also when L != S.
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:  # True = may attend
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:  # additive mask, applied after scaling
            scores = scores + attn_mask
    return scores


def _safe_softmax(scores: Tensor) -> Tensor:
    """Softmax over the keys; a row whose every key is masked gives zeros, not NaN.

    Subtracting the row maximum keeps exp() in range; it is detached because it
    cancels out of the result and so contributes no gradient.
    """
    row_max = scores.amax(dim=-1, keepdim=True)
    fully_masked = row_max == float("-inf")
    row_max = torch.where(fully_masked, torch.zeros_like(row_max), row_max).detach()
    exp = torch.exp(scores - row_max)
    denom = exp.sum(dim=-1, keepdim=True)
    return exp / torch.where(fully_masked, torch.ones_like(denom), denom)


def attention_weights(query: Tensor, key: Tensor, attn_mask: Tensor | None = None,
                      is_causal: bool = False, scale: float | None = None) -> Tensor:
    """The softmax weights (..., L, S) that ``scaled_dot_product_attention`` applies to V."""
    return _safe_softmax(_masked_scores(query, key, attn_mask, is_causal, scale))


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None, *,
                                 generator: torch.Generator | None = None) -> Tensor:
    """softmax(Q Kᵀ · scale + mask) V.

    query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev); batch
    dimensions broadcast. A boolean mask means True = may attend; a float mask is
    added to the scaled scores; ``is_causal`` is ``ones(L, S).tril()``. Default
    scale 1/√E. Dropout on the weights draws from ``generator`` so a run can be
    reproduced.
    """
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    weights = attention_weights(query, key, attn_mask, is_causal, scale)  # (..., L, S)
    if dropout_p > 0.0:
        keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= dropout_p
        weights = weights * keep / (1.0 - dropout_p)
    return weights @ value  # (..., L, Ev)


def multi_head_attention(x_q: Tensor, x_kv: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor,
                         w_o: Tensor, num_heads: int, attn_mask: Tensor | None = None,
                         is_causal: bool = False) -> Tensor:
    """Multi-head attention without biases.

    x_q (B, L, d_model), x_kv (B, S, d_model); each weight (d_model, d_model) is
    applied like ``nn.Linear`` (x @ Wᵀ). Heads have d_k = d_model / num_heads and
    their own scale 1/√d_k; masks broadcast to (B, num_heads, L, S).
    """
    B, L, d_model = x_q.shape
    S = x_kv.size(1)
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads

    def split_heads(x: Tensor, length: int) -> Tensor:  # (B, T, d_model) -> (B, H, T, d_k)
        return x.reshape(B, length, num_heads, d_k).transpose(1, 2)

    q = split_heads(x_q @ w_q.T, L)
    k = split_heads(x_kv @ w_k.T, S)
    v = split_heads(x_kv @ w_v.T, S)
    heads = scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
    merged = heads.transpose(1, 2).reshape(B, L, d_model)  # heads concatenated in order
    return merged @ w_o.T


def sdpa_float64(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                 is_causal: bool = False, scale: float | None = None) -> Tensor:
    """The gold path: the same inputs upcast to float64 (on their own device)."""
    up = lambda t: None if t is None else (t.double() if t.is_floating_point() else t)
    return scaled_dot_product_attention(up(query), up(key), up(value), up(attn_mask),
                                        is_causal=is_causal, scale=scale)


def attention_backward(query: Tensor, key: Tensor, value: Tensor, grad_out: Tensor,
                       scale: float | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV) of unmasked attention in float64, from the formulas alone (no autograd graph):
    P = softmax(s·QKᵀ), dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = s·dS·K,
    dK = s·dSᵀ·Q. Cheaper than autograd through the forward where the inputs are large."""
    q, k, v, g = query.double(), key.double(), value.double(), grad_out.double()
    s = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    p = torch.softmax(q @ k.transpose(-2, -1) * s, dim=-1)        # (..., L, S)
    dp = g @ v.transpose(-2, -1)                                   # (..., L, S)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))                 # the softmax's Jacobian, row by row
    return s * (ds @ k), s * (ds.transpose(-2, -1) @ q), p.transpose(-2, -1) @ g
