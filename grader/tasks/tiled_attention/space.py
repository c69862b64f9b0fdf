"""``tiled_attention``'s input space: the edges one call stands on (``Task.input_space`` declares
them): how the keys and the queries fall into tiles of ``block_size``."""
from __future__ import annotations

from ...checks import input_space as edges


def describe(args, kwargs) -> dict:
    q, k, _, block = args[:4]
    L, S = q.size(-2), k.size(-2)
    keys = ["ragged last key tile" if S % block else "S a multiple of block_size"]
    if block == 1:
        keys.append("block_size = 1")
    if block >= S:
        keys.append("block_size >= S")
    queries = ["ragged last query tile, L > 32"] if L > 32 and L % block else []
    return {"key tiles": keys, "query tiles": queries, "logits": edges.logits(q, k), "dtype": edges.dtype(q)}
