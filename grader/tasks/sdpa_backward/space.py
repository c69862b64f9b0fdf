"""``sdpa_backward``'s input space: the edges one call ``(q, k, v, grad_out)`` stands on, those of
the forward it differentiates (``Task.input_space`` declares them)."""
from __future__ import annotations

from ...checks import input_space as edges


def describe(args, kwargs) -> dict:
    return edges.attention(*args[:3], kwargs)
