"""Edges of tiled_attention's input space no other case draws (grader/checks/edge_cases.py)."""
from __future__ import annotations

import torch

from . import checks as tiled
from ...checks.base import Fail
from ...checks.edge_cases import _named_overflow
from ...checks.variants import explain
from ...i18n import T


def ragged_queries(ctx):
    block = ctx.inputs.randint(5, 8)
    L = 33 + ctx.inputs.randint(0, 14)
    L += L % block == 0  # never a multiple of the block: the last query tile is cut short
    S = ctx.inputs.randint(17, 29)
    S += S % block == 0
    E, Ev = ctx.inputs.distinct(2, 6, 14)
    worst = tiled.run_tiled(ctx, *tiled._qkv(ctx, L, S, E, Ev, dtype=torch.float32), block,
                            what=T("float32, L={L} > 32, S={S}, block_size={block} (neither a multiple of it)",
                                   L=L, S=S, block=block))
    return T("matches the reference when the last query tile and the last key tile are cut short (max error "
             "{worst:.2g})", worst=worst)
