"""How close is close enough: one rule for every comparison.

A submission is compared with the float64 reference. The allowance is a multiple
of the error that the reference itself makes when run in the submission's dtype
(the FlashAttention / PyTorch test-suite rule), plus a small floor for rounding.
So einsum, loops over rows, blockwise online softmax or float64 inside all pass,
while a float16 shortcut (errors ~1e-3) and every semantic bug (errors > 0.05 on
unit-variance inputs) fail. NaN or inf where the reference is finite never passes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..i18n import N_, T, counted

# Rounding floors relative to max(1, max|reference|), by the dtype the submission ran in.
# float64's floor admits float32-rounded constants (torch.sqrt(torch.tensor(d_k))), which are
# harmless; full float64 precision is reported by the unscored ``precision`` family instead.
FLOORS = {torch.float64: 1e-6, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
STRICT_FLOAT64 = 1e-10
# Properties that hold exactly in exact arithmetic are checked to this relative precision.
PROPERTY_TOLERANCE = 1e-6
OUTPUT_MULTIPLIER = 4.0
GRAD_MULTIPLIER = 8.0
GRAD_FLOOR_FACTOR = 5.0


@dataclass
class Comparison:
    ok: bool
    max_error: float
    bound: float
    where: list | None          # index of the worst element
    got: float | None
    expected: float | None
    nonfinite: int              # elements that are NaN/inf where the reference is finite

    def details(self) -> dict:
        return {"max_error": _num(self.max_error), "tolerance": _num(self.bound),
                "worst_index": self.where, "worst_value": _num(self.got),
                "expected_value": _num(self.expected), "nonfinite": self.nonfinite}

    def describe(self) -> T:
        if self.nonfinite:
            return counted(self.nonfinite, N_("{count} value is NaN or infinite where the reference is finite "
                                              "(first at index {where})"),
                           N_("{count} values are NaN or infinite where the reference is finite (first at index "
                              "{where})"), count=self.nonfinite, where=self.where)
        return T("largest difference from the reference is {error:.3g} at index {where} (yours {got:.6g}, "
                 "expected {expected:.6g}; allowed {bound:.2g})", error=self.max_error, where=self.where,
                 got=self.got, expected=self.expected, bound=self.bound)

    def failure(self, what, cause="") -> T:
        """A check's message for this miss: the case, the numbers, and the likely cause if named."""
        return T("{what}: {comparison}.{cause}", what=what, comparison=self.describe(),
                 cause=T(" Likely cause: {cause}.", cause=cause) if cause else "")


def _num(x):
    if x is None:
        return None
    x = float(x)
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return float(f"{x:.6g}")


def allowance(ref64: torch.Tensor, ref_same: torch.Tensor | None, dtype: torch.dtype,
              multiplier: float = OUTPUT_MULTIPLIER, floor_factor: float = 1.0) -> float:
    """The largest error a correct implementation in ``dtype`` may make against ``ref64``."""
    finite = torch.isfinite(ref64)
    magnitude = max(1.0, float(ref64[finite].abs().max())) if finite.any() else 1.0
    floor = FLOORS.get(dtype, 1e-5) * floor_factor * magnitude
    base = 0.0
    if ref_same is not None and dtype != torch.float64:
        diff = (ref_same.double() - ref64)[finite]
        diff = diff[torch.isfinite(diff)]
        base = float(diff.abs().max()) if diff.numel() else 0.0
    return multiplier * base + floor


def compare(out: torch.Tensor, ref64: torch.Tensor, bound: float) -> Comparison:
    """Compare ``out`` (any float dtype, same shape) with the float64 reference."""
    out64 = out.detach().double()
    ref_finite = torch.isfinite(ref64)
    bad = ref_finite & ~torch.isfinite(out64)
    # Where the reference itself is not finite, the submission must match it exactly.
    bad |= ~ref_finite & ~((out64 == ref64) | (out64.isnan() & ref64.isnan()))
    err = (out64 - ref64).abs()
    err = torch.where(ref_finite, err, torch.zeros_like(err))
    err = torch.nan_to_num(err, nan=float("inf"))
    nonfinite = int(bad.sum())
    if nonfinite:
        flat = int(bad.flatten().nonzero()[0])
    else:
        flat = int(err.flatten().argmax()) if err.numel() else 0
    where = _unravel(flat, tuple(err.shape)) if err.numel() else []
    max_error = float("inf") if nonfinite else (float(err.max()) if err.numel() else 0.0)
    got = float(out64.flatten()[flat]) if err.numel() else None
    expected = float(ref64.flatten()[flat]) if err.numel() else None
    return Comparison(nonfinite == 0 and max_error <= bound, max_error, bound, where, got, expected, nonfinite)


def _unravel(flat: int, shape: tuple) -> list[int]:
    """torch.unravel_index for one index, without its first-call import of sympy."""
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return index[::-1]


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """max|a - b| / max(1, max|b|), NaN-aware (NaN anywhere -> inf); for matching known bugs."""
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape:
        return float("inf")
    both_nan = a.isnan() & b.isnan()
    err = torch.where(both_nan, torch.zeros_like(a), (a - b).abs())
    err = torch.nan_to_num(err, nan=float("inf"), posinf=float("inf"))
    finite_b = b[torch.isfinite(b)]
    scale = max(1.0, float(finite_b.abs().max())) if finite_b.numel() else 1.0
    return float(err.max()) / scale if err.numel() else 0.0
