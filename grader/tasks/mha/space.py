"""``mha``'s input space: the edges one call stands on (``Task.input_space`` declares them)."""
from __future__ import annotations

from ...checks import input_space as edges


def describe(args, kwargs) -> dict:
    x_q, x_kv, num_heads = args[0], args[1], args[6]
    return {"heads": ["1" if num_heads == 1 else "more than 1"],
            "lengths": [edges.lengths(x_q.size(-2), x_kv.size(-2))], "mask": edges.mask_edges(kwargs),
            "dtype": edges.dtype(x_q)}
