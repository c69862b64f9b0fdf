"""``decoder_attention``'s input space: the edges one call stands on (``Task.input_space`` declares
them): how each padded batch is filled."""
from __future__ import annotations

from ...checks import input_space as edges


def describe(args, kwargs) -> dict:
    target, memory, t_len, m_len = args[:4]
    return {"target padding": edges.padding(t_len, target.size(1)),
            "memory padding": edges.padding(m_len, memory.size(1)),
            "logits": edges.logits(target, target), "dtype": edges.dtype(target)}
