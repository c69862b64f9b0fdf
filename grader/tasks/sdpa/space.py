"""``sdpa``'s input space: the edges one call stands on (``Task.input_space`` declares them)."""
from __future__ import annotations

from ...checks import input_space as edges


def describe(args, kwargs) -> dict:
    return edges.attention(*args[:3], kwargs)
