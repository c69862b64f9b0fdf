"""The chapter's measurable claims about the 1/√d_k scale, as functions that return data.

Three experiments, each seeded and reproducible, all on random queries and keys whose
components are i.i.d. N(0, 1) (the chapter's assumption about activations at initialisation):

1. :func:`score_variance`: Var(q·k) = d_k, and Var(q·k/√d_k) = 1.
2. :func:`softmax_saturation`: without the scale the softmax over the keys collapses towards a
   one-hot vector as d_k grows; with 1/√d_k it stays put; with 1/d_k it drifts to uniform.
3. :func:`gradient_flow`: the size of the gradient that reaches the scores and the queries
   through the softmax, for the same three scales.

Inputs are drawn on the CPU from a seeded ``torch.Generator`` and then moved to ``device``, so a
seed gives the same samples on every device; the arithmetic is float64 unless told otherwise.
The attention itself is the project's reference (:mod:`reference_impl.attention`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch
from torch import Tensor

from .attention import attention_weights
from .device import resolve_device

#: The scales compared throughout: no scaling, the chapter's 1/√d_k, and "too much" 1/d_k.
SCALES: dict[str, Callable[[int], float]] = {
    "none": lambda d_k: 1.0,
    "1/sqrt(d_k)": lambda d_k: 1.0 / math.sqrt(d_k),
    "1/d_k": lambda d_k: 1.0 / d_k,
}

VARIANCE_DIMS = (8, 16, 32, 64, 128, 256, 512)
SOFTMAX_DIMS = (16, 64, 256, 1024)
#: A row whose softmax Jacobian has Frobenius norm below this passes (almost) no gradient back:
#: it is about 1/100 of the norm of a row with unit-variance logits over 128 keys (≈ 0.13).
VANISHED_JACOBIAN = 1e-3


@dataclass(frozen=True)
class VarianceRow:
    """Sample variance of n_pairs independent dot products of N(0, I_{d_k}) vectors.

    ``ratio`` = var_unscaled / d_k, which the theory puts at 1. Its sampling standard deviation
    is ``ratio_sd`` = √((2 + 6/d_k) / n): q·k is a sum of d_k products with variance 1 and fourth
    moment 9, so E[(q·k)⁴] = 3d_k² + 6d_k and Var((q·k)²) = 2d_k² + 6d_k.
    """
    d_k: int
    n_pairs: int
    mean_unscaled: float
    var_unscaled: float
    var_scaled: float
    ratio: float
    ratio_sd: float


@dataclass(frozen=True)
class SaturationRow:
    """How peaked softmax(scale · q·kᵀ) is over ``seq_len`` keys, averaged over ``rows`` queries.

    ``logit_std`` is the measured std of the scaled scores (theory: scale·√d_k). The entropy of a
    row is −Σ p log p in nats: ``uniform_entropy`` = ln(seq_len) is its ceiling and 0 a one-hot
    row; for a small logit variance σ² it is ≈ ln S − σ²/2. ``share_max_over_0_9`` is the share
    of rows whose largest weight exceeds 0.9, i.e. attention that is nearly a hard choice.
    """
    d_k: int
    scale: str
    seq_len: int
    rows: int
    logit_std: float
    mean_max_weight: float
    mean_entropy: float
    uniform_entropy: float
    share_max_over_0_9: float


@dataclass(frozen=True)
class GradientRow:
    """Gradient that flows back through the softmax, per query row.

    With p = softmax(s) and upstream g = ∂L/∂p, the scores get ∂L/∂s = J g with the Jacobian
    J = diag(p) − p pᵀ, whose squared Frobenius norm is Σp_i² − 2Σp_i³ + (Σp_i²)². It is 0 for a
    one-hot p (a saturated softmax passes nothing back), ≈ 1/√S for a uniform p, and largest for
    rows split between a few keys. The queries then get ∂L/∂q = scale · (∂L/∂s) K, so the scale
    multiplies their gradient a second time.

    ``grad_q_*`` come from backpropagating a random upstream gradient through the whole attention
    softmax(scale · QKᵀ) V with N(0, 1) values (see :func:`gradient_flow`); they are element-wise
    |∂L/∂q|, and ``grad_scores_mean_abs`` is the element-wise mean of |∂L/∂s|.
    Mean and median are both given because without scaling the distribution is heavy-tailed:
    most rows get almost nothing while rows with two near-tied keys get very large gradients.
    """
    d_k: int
    scale: str
    seq_len: int
    rows: int
    jacobian_norm_mean: float
    jacobian_norm_median: float
    share_vanished: float
    grad_scores_mean_abs: float
    grad_q_mean_abs: float
    grad_q_median_abs: float


@dataclass
class ExperimentReport:
    """Everything one run measured, with what is needed to reproduce it."""
    seed: int
    device: str
    dtype: str
    seq_len: int
    variance: list[VarianceRow] = field(default_factory=list)
    saturation: list[SaturationRow] = field(default_factory=list)
    gradients: list[GradientRow] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain JSON-serialisable data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ExperimentReport":
        """The inverse of :meth:`to_dict`, e.g. for ``attn-grader experiments --json`` output."""
        rows = {"variance": VarianceRow, "saturation": SaturationRow, "gradients": GradientRow}
        return cls(**{key: [rows[key](**r) for r in value] if key in rows else value
                      for key, value in data.items()})


def _randn(shape: tuple[int, ...], generator: torch.Generator, device: torch.device,
           dtype: torch.dtype) -> Tensor:
    # Drawn on the CPU so that a seed means the same samples on every device, and in float32,
    # three times faster than float64 there; the arithmetic afterwards is in ``dtype``.
    return torch.randn(shape, generator=generator, dtype=torch.float32).to(device, dtype)


def _check_dims(dims: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    dims = tuple(dims)
    if not dims or any(not isinstance(d, int) or d < 1 for d in dims):
        raise ValueError(f"dims must be positive integers, got {dims!r}")
    return dims


def _check_seq_len(seq_len: int) -> None:
    if seq_len < 2:
        raise ValueError(f"seq_len must be at least 2 (a softmax over one key is always 1), "
                         f"got {seq_len}")


def score_variance(dims=VARIANCE_DIMS, n_pairs: int = 16384, seed: int = 0, device="cpu",
                   dtype: torch.dtype = torch.float64) -> list[VarianceRow]:
    """Var(q·k) and Var(q·k/√d_k) for independent q, k ~ N(0, I_{d_k}).

    Each q_i k_i has mean 0 and variance E[q_i²]E[k_i²] = 1, and the d_k terms are independent,
    so Var(q·k) = d_k (Vaswani et al. 2017, footnote 4) and dividing by √d_k makes it 1.
    The pairs are drawn once at the largest d_k and each smaller d_k uses their first d_k
    components: every row is an honest sample of n_pairs dot products, at half the cost of
    drawing each d_k anew (rows of the table are correlated with each other, which is fine).
    """
    dims = _check_dims(dims)
    if n_pairs < 2:
        raise ValueError(f"n_pairs must be at least 2, got {n_pairs}")
    device = resolve_device(device)
    g = torch.Generator().manual_seed(seed)
    q = _randn((n_pairs, max(dims)), g, device, dtype)
    k = _randn((n_pairs, max(dims)), g, device, dtype)
    prefix_dots = (q * k).cumsum(-1)  # [:, d - 1] is q·k over the first d components
    rows = []
    for d_k in dims:
        s = prefix_dots[:, d_k - 1]  # (n_pairs,)
        var = s.var().item()
        rows.append(VarianceRow(d_k=d_k, n_pairs=n_pairs, mean_unscaled=s.mean().item(),
                                var_unscaled=var, var_scaled=(s / math.sqrt(d_k)).var().item(),
                                ratio=var / d_k, ratio_sd=math.sqrt((2 + 6 / d_k) / n_pairs)))
    return rows


def _queries_and_keys(d_k: int, seq_len: int, batch: int, queries: int, g: torch.Generator,
                      device: torch.device, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    q = _randn((batch, queries, d_k), g, device, dtype)  # (B, L, d_k)
    k = _randn((batch, seq_len, d_k), g, device, dtype)  # (B, S, d_k)
    return q, k


def softmax_saturation(dims=SOFTMAX_DIMS, seq_len: int = 128, batch: int = 8, queries: int = 128,
                       seed: int = 0, device="cpu",
                       dtype: torch.dtype = torch.float64) -> list[SaturationRow]:
    """Peakedness of the attention weights for each d_k and each scale in :data:`SCALES`.

    The logits scale·q·k have std scale·√d_k: √d_k unscaled, 1 with 1/√d_k, 1/√d_k with 1/d_k.
    The same q, k are used for the three scales of a d_k so that only the scale differs.
    """
    dims = _check_dims(dims)
    _check_seq_len(seq_len)
    device = resolve_device(device)
    g = torch.Generator().manual_seed(seed)
    out = []
    for d_k in dims:
        q, k = _queries_and_keys(d_k, seq_len, batch, queries, g, device, dtype)
        raw_std = (q @ k.transpose(-2, -1)).std().item()  # of the unscaled scores (B, L, S)
        for name, scale_of in SCALES.items():
            scale = scale_of(d_k)
            p = attention_weights(q, k, scale=scale)  # (B, L, S)
            top = p.amax(-1)  # (B, L)
            entropy = torch.special.entr(p).sum(-1)  # −Σ p log p, with 0 log 0 = 0
            out.append(SaturationRow(
                d_k=d_k, scale=name, seq_len=seq_len, rows=top.numel(),
                logit_std=raw_std * scale, mean_max_weight=top.mean().item(),
                mean_entropy=entropy.mean().item(), uniform_entropy=math.log(seq_len),
                share_max_over_0_9=(top > 0.9).double().mean().item()))
    return out


def softmax_jacobian_norm(p: Tensor) -> Tensor:
    """Frobenius norm of J = diag(p) − ppᵀ for each distribution along the last dim.

    ‖J‖_F² = Σ_i p_i²(1 − p_i)² + Σ_{i≠j} p_i²p_j² = Σp_i² − 2Σp_i³ + (Σp_i²)², computed without
    materialising the S×S matrix. For a nearly one-hot p the three terms cancel, so values below
    ~1e-8 (in float64) are rounding noise: clamped at 0 and read as "no gradient".
    """
    p2 = p * p
    s2, s3 = p2.sum(-1), (p2 * p).sum(-1)
    return (s2 - 2 * s3 + s2 ** 2).clamp_min(0).sqrt()


def attention_gradients(q: Tensor, k: Tensor, v: Tensor, upstream: Tensor,
                        scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """Weights p (..., L, S), ∂L/∂s (..., L, S) and ∂L/∂q (..., L, d_k) of L = ⟨p V, G⟩.

    The chain rule by hand instead of autograd (a third of the work; the tests check it against
    autograd through the reference): ∂L/∂p = G Vᵀ, ∂L/∂s = J ∂L/∂p = p ⊙ (∂L/∂p − ⟨p, ∂L/∂p⟩)
    row by row, ∂L/∂q = scale · (∂L/∂s) K.
    """
    p = attention_weights(q, k, scale=scale)  # (..., L, S)
    grad_p = upstream @ v.transpose(-2, -1)  # (..., L, S)
    grad_scores = p * (grad_p - (p * grad_p).sum(-1, keepdim=True))
    return p, grad_scores, scale * grad_scores @ k


def gradient_flow(dims=SOFTMAX_DIMS, seq_len: int = 128, batch: int = 8, queries: int = 128,
                  seed: int = 0, device="cpu", dtype: torch.dtype = torch.float64
                  ) -> list[GradientRow]:
    """Gradient size through the softmax for each d_k and each scale in :data:`SCALES`.

    The loss is L = ⟨attention(q, k, v), G⟩ with a random upstream gradient G ~ N(0, 1/d_k), so
    nothing about the target favours one scale and ∂L/∂p = G Vᵀ has unit-variance entries
    whatever d_k. Same q, k, v, G for the three scales.
    """
    dims = _check_dims(dims)
    _check_seq_len(seq_len)
    device = resolve_device(device)
    g = torch.Generator().manual_seed(seed)
    out = []
    for d_k in dims:
        q, k = _queries_and_keys(d_k, seq_len, batch, queries, g, device, dtype)
        v = _randn((batch, seq_len, d_k), g, device, dtype)  # (B, S, d_k)
        upstream = _randn((batch, queries, d_k), g, device, dtype) / math.sqrt(d_k)  # (B, L, d_k)
        for name, scale_of in SCALES.items():
            p, grad_scores, grad_q = attention_gradients(q, k, v, upstream, scale_of(d_k))
            grad_q = grad_q.abs()
            jac = softmax_jacobian_norm(p)  # (B, L)
            out.append(GradientRow(
                d_k=d_k, scale=name, seq_len=seq_len, rows=jac.numel(),
                jacobian_norm_mean=jac.mean().item(), jacobian_norm_median=jac.median().item(),
                share_vanished=(jac < VANISHED_JACOBIAN).double().mean().item(),
                grad_scores_mean_abs=grad_scores.abs().mean().item(),
                grad_q_mean_abs=grad_q.mean().item(), grad_q_median_abs=grad_q.median().item()))
    return out


def run_all(seed: int = 0, device="cpu", seq_len: int = 128, dims=SOFTMAX_DIMS,
            dtype: torch.dtype = torch.float64) -> ExperimentReport:
    """The three experiments (under a second or two on a CPU with the defaults).

    ``dims`` are the d_k of experiments 2 and 3; experiment 1 always covers 8..512.
    """
    device = resolve_device(device)
    return ExperimentReport(
        seed=seed, device=str(device), dtype=str(dtype).removeprefix("torch."), seq_len=seq_len,
        variance=score_variance(seed=seed, device=device, dtype=dtype),
        saturation=softmax_saturation(dims, seq_len=seq_len, seed=seed, device=device, dtype=dtype),
        gradients=gradient_flow(dims, seq_len=seq_len, seed=seed, device=device, dtype=dtype))
