"""Checks of the ``kv_cache_attention`` task: one decoding step of masked self-attention with a key/value cache.

``kv_cache_attention(query, key, value, k_cache, v_cache, position)`` returns
(output, k_cache, v_cache): the new token's key and value written at row ``position`` of the
caches (rows 0..position-1 hold the earlier steps, the rest is padding), and the new query's
attention over rows 0..position. The parent computes every step's reference, and on a miss the
known wrong steps (``bugs``), in float64; ``steps.decode`` runs T steps on the caches the student
returns and compares them with causal attention over the whole sequence at once.
"""
from __future__ import annotations

import torch

from reference_impl import scaled_dot_product_attention
from . import bugs
from ...checks import tuples
from ...checks.base import Fail
from ...checks.tolerance import OUTPUT_MULTIPLIER, allowance, compare, relative_error
from ...checks.tuples import Outputs, judge, key_name
from ...checks.variants import identify
from ...i18n import T

SPEC = Outputs(names=bugs.NAMES, explain=bugs.CATALOGUE.explain, dtype_bug="outputs_wrong_dtype")


def reference(query, key, value, k_cache, v_cache, position, dtype=None):
    """The step's three outputs in float64, or (``dtype``) computed in that dtype for the allowance."""
    if dtype is None:
        return bugs.step(query, key, value, k_cache, v_cache, position)
    kc, vc = k_cache.clone(), v_cache.clone()
    kc[:, position], vc[:, position] = key[:, 0], value[:, 0]
    out = scaled_dot_product_attention(query, kc[:, :position + 1], vc[:, :position + 1])
    return out, kc, vc


def _shapes(args):
    query, value, k_cache, v_cache = args[0], args[2], args[3], args[4]
    return [(*query.shape[:-1], value.size(-1)), tuple(k_cache.shape), tuple(v_cache.shape)]


def run_step(ctx, args, *, what: str):
    outs, worst = judge(ctx, SPEC, args, {}, shapes=_shapes(args), ref64=reference(*args),
                        same=reference(*args, dtype=args[0].dtype),
                        variants=lambda: bugs.wrong_steps(*args), what=what)
    return worst


# ---- inputs -----------------------------------------------------------------------------
def draw(ctx, dtype=torch.float64, *, position=None, B=None, padding="stale"):
    """One step's arguments: caches of N rows, ``position`` of them filled by earlier steps (None: in
    the middle; "last": N - 1); the rows from ``position`` on are padding: ``stale`` values (a reused
    buffer) or ``zeros`` (a fresh one)."""
    B = B or ctx.inputs.randint(2, 4)
    N = ctx.inputs.randint(6, 9)
    if position is None:  # at 1, attending before the append and a causal mask both see key 0 alone
        position = ctx.inputs.randint(2, N - 2)
    elif position == "last":
        position = N - 1
    # 1/√D differs from 1/√ of the rows a step attends to (position + 1, or a neighbour, or N)
    D, Dv = ctx.inputs.distinct(2, 3, 16, avoid=(position, position + 1, position + 2, N))
    r = ctx.inputs.randn
    k_cache, v_cache = r(B, N, D, dtype=dtype), r(B, N, Dv, dtype=dtype)
    if padding == "zeros":
        k_cache[:, position:], v_cache[:, position:] = 0, 0
    else:  # stale rows, larger than the real ones: attending to them cannot hide
        k_cache[:, position:] *= 3
        v_cache[:, position:] *= 3
    return (r(B, 1, D, dtype=dtype), r(B, 1, D, dtype=dtype), r(B, 1, Dv, dtype=dtype), k_cache, v_cache,
            position)


def _what(label, args):
    query, value, k_cache, position = args[0], args[2], args[3], args[5]
    return (f"{label} (B={query.size(0)}, N={k_cache.size(1)}, D={query.size(-1)}, Dv={value.size(-1)}, "
            f"position={position})")


# ---- checks -----------------------------------------------------------------------------
def step_float32(ctx):
    args = draw(ctx, torch.float32)
    worst = run_step(ctx, args, what=_what("one float32 step", args))
    return T("the output and both caches match the reference on one step (max error {worst:.2g})", worst=worst)


def step_float64(ctx):
    args = draw(ctx)
    worst = run_step(ctx, args, what=_what("one float64 step", args))
    return T("float64 inputs give float64-accurate results (max error {worst:.2g})", worst=worst)


dtype_case = lambda dtype: tuples.dtype_case(dtype, lambda ctx, dt: draw(ctx, dt), SPEC, _shapes)  # noqa: E731


def first_step(ctx):
    args = draw(ctx, position=0, padding="zeros")
    run_step(ctx, args, what=_what("the first step: an empty cache", args))
    return T("on an empty cache the step attends to its own key only")


def last_slot(ctx):
    args = draw(ctx, position="last", B=1)  # a batch of one, too: nothing is averaged over sequences
    run_step(ctx, args, what=_what("the last free row of the cache, a batch of one", args))
    return T("the step writes and reads the cache's last row (position = N - 1)")


def stale_padding(ctx):
    args = draw(ctx, padding="stale")
    run_step(ctx, args, what=_what("stale values in the padded rows", args))
    return T("the padded rows after position get no weight")


def zero_padding(ctx):
    args = draw(ctx, padding="zeros")
    run_step(ctx, args, what=_what("zeros in the padded rows", args))
    return T("zero padded rows get no weight either (a zero key still scores 0)")


def scale_default(ctx):
    args = draw(ctx)
    run_step(ctx, args, what=_what("the scale: D differs from the rows attended", args))
    return T("the scores are scaled by 1/√D, whatever the cache holds")


def decode(ctx):
    """T steps from an empty cache, each given the caches the last one returned: the outputs must be
    causal attention over the whole sequence at once (a decoder trains in parallel and generates one
    token at a time, and the two must agree)."""
    B, T_ = ctx.inputs.randint(2, 3), ctx.inputs.randint(4, 6)
    N = T_ + ctx.inputs.randint(1, 3)  # a preallocated cache longer than the sequence
    D, Dv = ctx.inputs.distinct(2, 3, 12, avoid=tuple(range(1, N + 2)))
    r = ctx.inputs.randn
    q, k, v = r(B, T_, D, dtype=torch.float64), r(B, T_, D, dtype=torch.float64), r(B, T_, Dv, dtype=torch.float64)
    k_cache, v_cache = torch.zeros(B, N, D, dtype=torch.float64), torch.zeros(B, N, Dv, dtype=torch.float64)
    what = f"{T_} decoding steps from an empty cache (B={B}, N={N}, D={D}, Dv={Dv})"
    outs = []
    for t in range(T_):
        args = (q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], k_cache, v_cache, t)
        result = ctx.call(*args, during=T("step {step} of {steps}", step=t + 1, steps=T_))
        out, k_cache, v_cache = ctx.tuple_out(result, _shapes(args), SPEC.names, what)
        outs.append(out)
    got = torch.cat(outs, dim=1).double()
    full = scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, T, Dv): all the steps at once
    cmp = compare(got, full, allowance(full, None, torch.float64, OUTPUT_MULTIPLIER))
    if cmp.ok:
        ctx.attention_seen = True
        return T("{steps} steps, each on the caches the last returned, equal causal attention over the whole "
                 "sequence (max error {worst:.2g})", steps=T_, worst=cmp.max_error)
    candidates = {key: torch.nan_to_num(seq, nan=0.0) for key in bugs.KEYS
                  if (seq := bugs.decode(q, k, v, N, key)) is not None}
    cause = key_name(identify(torch.nan_to_num(got, nan=0.0), candidates, relative_error(got, full)))
    if cause:
        ctx.attention_seen = True
    raise Fail(T("{what}: your outputs differ from causal attention over the whole sequence; {comparison}.{cause}",
                 what=what, comparison=cmp.describe(),
                 cause=T(" Likely cause: {cause}.", cause=SPEC.explain(cause)) if cause else ""),
               {"case": what, "diagnosis": cause, **cmp.details()})
