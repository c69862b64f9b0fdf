"""Edges of decoder_attention's input space no other case draws (grader/checks/edge_cases.py)."""
from __future__ import annotations

import torch

from . import checks as decoder
from ...checks.base import Fail
from ...checks.edge_cases import _named_overflow
from ...checks.variants import explain
from ...i18n import T


def large_scores(ctx):
    B, steps, S, _ = decoder.dims(ctx)
    D = steps + S  # room for steps + S - 1 orthogonal directions
    # Every row one-hot by a lead of 1000 (so no rounding of these logits can show, in any dtype):
    # target row i is c·e_i, memory key 0 is c·(e_0 + ... + e_{steps-1}) and key j > 0 is c·e_{steps+j-1},
    # all turned by one random rotation. Self-attention logits are c²/√D = 1000 on the diagonal and 0
    # elsewhere; every query's cross-attention logit is 1000 for memory key 0 (never padded) and 0 for
    # the rest. exp(1000) is inf in float64: a softmax without the row maximum gives NaN.
    c = (1000.0 * D ** 0.5) ** 0.5
    rotation, _ = torch.linalg.qr(ctx.inputs.randn(D, D, dtype=torch.float64))
    eye = torch.eye(D, dtype=torch.float64)
    target = (c * eye[:steps]).expand(B, steps, D) @ rotation
    memory = c * torch.cat([eye[:steps].sum(0, keepdim=True), eye[steps:steps + S - 1]]) @ rotation
    args = (target.contiguous(), memory.expand(B, S, D).contiguous(),
            decoder.lengths(ctx, B, steps), decoder.lengths(ctx, B, S))
    try:
        decoder.run_decoder(ctx, *args, what=decoder._what("float64 logits of 1000", *args))
    except Fail as miss:
        raise _named_overflow(ctx, miss, "overflow_in_softmax",
                              lambda: (args[0] / c, args[1] / c, args[2], args[3]),
                              dtype_bug="outputs_wrong_dtype") from None
    return T("no overflow with float64 logits above 709: the row maximum is subtracted")


def no_full_row(ctx):
    B, steps, S, D = decoder.dims(ctx)
    r = ctx.inputs.randn
    # Every sequence shorter than the padded length: masks must be sized by the tensors, not by
    # the longest sequence of the batch.
    t_len = torch.tensor([ctx.inputs.randint(1, steps - 1) for _ in range(B)], dtype=torch.int64)
    m_len = torch.tensor([ctx.inputs.randint(1, S - 1) for _ in range(B)], dtype=torch.int64)
    args = (r(B, steps, D, dtype=torch.float64), r(B, S, D, dtype=torch.float64), t_len, m_len)
    decoder.run_decoder(ctx, *args, what=decoder._what("no sequence fills the padded length", *args))
    return T("a batch in which no sequence fills the padded length: the masks follow the tensors' sizes")
