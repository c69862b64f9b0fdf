"""Checks for edges of the input space that real bugs live on and no other case drew.

- ``sdpa_backward``: float64 scores beyond float32's range (about 1e40): a backward computed in
  float32 inside, or one that exponentiates without subtracting the row maximum, gives NaN.
- ``decoder_attention``: float64 logits above 709.8 (a softmax without the row maximum
  overflows), and a padded batch in which no sequence fills the padded length (a mask sized by
  the longest sequence no longer fits the tensors).
- ``tiled_attention``: a last query tile cut short, L > 32 and not a multiple of block_size.

Each edge is also declared in its task's ``input_space`` (grader/checks/input_space.py).
"""
from __future__ import annotations

import torch

from . import backward, decoder, diagnosis, tiled  # noqa: F401  (diagnosis: registers the overflow names)
from .base import Fail
from .variants import explain
from ..i18n import T

# The overflow names are diagnosis.py's (registered there, with their family: stability).


def _named_overflow(ctx, miss: Fail, name: str, tame, dtype_bug=None) -> Fail:
    """``miss`` with the overflow named, when its wrong values are NaN or inf where the reference is
    finite and the same call with small logits (``tame``: the case's arguments with the scores
    scaled down) comes back finite: then the size of the scores is what broke it. A bug that gives
    NaN whatever the scores keeps the name the variants gave it."""
    if not miss.details.get("nonfinite"):
        return miss
    try:
        args = tame()
        result = ctx.call(*args, during=T("the same inputs with small scores"))
        outs = result.output if isinstance(result.output, tuple) else (result.output,)
        finite = all(isinstance(o, torch.Tensor) and bool(torch.isfinite(o).all()) for o in outs)
    except Exception:  # raised or crashed there too: not the overflow's doing
        return miss
    if not finite:
        return miss
    if dtype_bug and any(isinstance(o, torch.Tensor) and o.dtype != args[0].dtype for o in outs):
        # Computed in float32 and returned so: the dtype family's bug, which this overflow follows from.
        return Fail(T("{what}: NaN or infinite values, and your outputs are not in the inputs' dtype. Likely "
                      "cause: {cause}.", what=miss.details.get("case", ""), cause=explain(dtype_bug)),
                    {**miss.details, "diagnosis": dtype_bug, "causes": {}})
    wrong = ", ".join(miss.details.get("wrong") or ())
    return Fail(T("{what}: {wrong} NaN or infinite where the reference is finite, and finite with small scores. "
                  "Likely cause: {cause}.", what=miss.details.get("case", ""), wrong=wrong, cause=explain(name)),
                {**miss.details, "diagnosis": name, "causes": {}})


# ---- sdpa_backward ------------------------------------------------------------------------
def backward_large_scores(ctx):
    """Scores near 1e40: float64 holds them, float32 does not (its largest is 3.4e38).

    The scores are exact in any order of operations, so a backward that recomputes them (P = exp(S −
    LSE), block by block) meets the same numbers: query and key are small integers times 2^66 and
    E = 16, so every product, sum and the default scale 1/4 are exact. The rows are one-hot (no row
    has two top keys): dV routes grad_out (judged as usual); dQ and dK are judged to the rounding of dS
    (eps · |dP|) that dQ = scale·dS·K multiplies by |K| ~ 1e20. What fails is what overflows: NaN or
    inf where the reference is finite. L = S: a formula that is wrong (or raises) only when L != S
    is the output checks' to charge.
    """
    from .tolerance import allowance, compare
    parts = backward._right(ctx)
    L, Ev = ctx.inputs.distinct(2, 5, 12)
    E = 16
    q, k, v, g = backward._case(ctx, L, L, E, Ev)
    q, k = torch.round(q * 2), torch.round(k * 2)
    for _ in range(200):  # no ties: at 1e40, LSE = max + log(count of tied keys) rounds to the max
        top2 = (q @ k.transpose(-2, -1)).topk(2, dim=-1).values  # exact integers
        tied = top2[..., 0] == top2[..., 1]
        if not tied.any():
            break
        q = torch.where(tied[..., None], torch.round(ctx.inputs.randn(*q.shape, dtype=torch.float64) * 2), q)
    q, k = q * 2.0 ** 66, k * 2.0 ** 66
    what = T("float64 scores beyond float32's range (about 1e40, L = S = {L}, E = {E})", L=L, E=E)
    result = ctx.call(q, k, v, g, during=what)
    outs = ctx.tuple_out(result, [q.shape, k.shape, v.shape], backward.NAMES, what)
    refs = backward.reference_grads(q, k, v, g)
    scale = E ** -0.5
    dp = float((g @ v.transpose(-2, -1)).abs().max())
    rounding = {"dQ": 64 * torch.finfo(torch.float64).eps * dp * float(k.abs().max()) * scale * L,
                "dK": 64 * torch.finfo(torch.float64).eps * dp * float(q.abs().max()) * scale * L}
    failures = []
    for name, out, ref in zip(backward.NAMES, outs, refs):
        if name not in parts:
            continue
        cmp = compare(out, ref, max(allowance(ref, None, torch.float64, backward.SPEC.multiplier,
                                              backward.SPEC.floor_factor), rounding.get(name, 0.0)))
        if not cmp.ok:
            failures.append((name, cmp))
    if not failures:
        return T("no overflow with float64 scores beyond float32's range: the backward keeps the inputs' dtype "
                 "and subtracts each row's maximum") + backward._noting(parts)
    name, cmp = failures[0]
    earlier = sorted(backward.named_bugs(ctx))
    if earlier and not any(c.nonfinite for _, c in failures):
        # Finite but wrong, in a function whose formula the output checks already found wrong: at
        # these scores its wrong dS is multiplied by |K| ~ 1e20. That bug's knock-on, not an overflow.
        raise Fail(T("{what}: {wrong} wrong; {name}: {comparison}. Likely cause: {cause}.", what=what,
                     wrong=", ".join(n for n, _ in failures), name=name, comparison=cmp.describe(),
                     cause=explain(earlier[0])),
                   {"case": what, "wrong": [n for n, _ in failures], "diagnosis": earlier[0], **cmp.details()})
    miss = Fail(T("{what}: {wrong} wrong; {name}: {comparison}.", what=what,
                  wrong=", ".join(n for n, _ in failures), name=name, comparison=cmp.describe()),
                {"case": what, "wrong": [n for n, _ in failures], **cmp.details()})
    raise _named_overflow(ctx, miss, "overflow_in_backward", lambda: (q / 2.0 ** 66, k / 2.0 ** 66, v, g),
                          dtype_bug="grads_wrong_dtype")


# ---- decoder_attention --------------------------------------------------------------------
def decoder_large_scores(ctx):
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


def decoder_no_full_row(ctx):
    B, steps, S, D = decoder.dims(ctx)
    r = ctx.inputs.randn
    # Every sequence shorter than the padded length: masks must be sized by the tensors, not by
    # the longest sequence of the batch.
    t_len = torch.tensor([ctx.inputs.randint(1, steps - 1) for _ in range(B)], dtype=torch.int64)
    m_len = torch.tensor([ctx.inputs.randint(1, S - 1) for _ in range(B)], dtype=torch.int64)
    args = (r(B, steps, D, dtype=torch.float64), r(B, S, D, dtype=torch.float64), t_len, m_len)
    decoder.run_decoder(ctx, *args, what=decoder._what("no sequence fills the padded length", *args))
    return T("a batch in which no sequence fills the padded length: the masks follow the tensors' sizes")


# ---- tiled_attention ----------------------------------------------------------------------
def tiled_ragged_queries(ctx):
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
