"""Properties any correct attention has: ``batch``, ``inputs``, ``permutation``, fully masked rows."""
from __future__ import annotations

import torch

from .base import Fail
from .tolerance import PROPERTY_TOLERANCE
from ..i18n import T



def _changed(a, b):
    d = (a.double() - b.double()).abs()
    return float(torch.nan_to_num(d, nan=float("inf")).max()) if d.numel() else 0.0


def sdpa_batch(ctx):
    B, H = 4, 3
    L, S, E, Ev = ctx.inputs.distinct(4, 5, 12)
    r = ctx.inputs.randn
    q, k, v = (r(B, H, L, E, dtype=torch.float64), r(B, H, S, E, dtype=torch.float64),
               r(B, H, S, Ev, dtype=torch.float64))
    base = ctx.tensor_out(ctx.call(q, k, v, during=T("batch probe")), (B, H, L, Ev))
    again = ctx.tensor_out(ctx.call(q, k, v, during=T("batch probe")), (B, H, L, Ev))
    if not torch.equal(torch.nan_to_num(base), torch.nan_to_num(again)):
        raise Fail(T("the same inputs twice gave different outputs, so independence cannot "
                     "be judged: is dropout (or other randomness) still on?"), {"diagnosis": "nondeterministic"})
    b, h = ctx.inputs.randint(0, B - 1), ctx.inputs.randint(0, H - 1)
    for where, index in ((f"batch element {b}", (b,)), (f"head {h} (of every batch element)", (slice(None), h))):
        q2, k2, v2 = q.clone(), k.clone(), v.clone()
        for t in (q2, k2, v2):
            t[index] = r(*t[index].shape, dtype=torch.float64)
        out = ctx.tensor_out(ctx.call(q2, k2, v2, during=T("batch probe")), (B, H, L, Ev))
        keep = torch.ones(B, H, dtype=torch.bool)
        keep[index] = False
        leak = _changed(out[keep], base[keep])
        if not leak <= PROPERTY_TOLERANCE * max(1.0, float(base.abs().max())):
            raise Fail(T("changing the inputs of {where} changed other outputs by up to "
                         "{leak:.3g}: your computation mixes {value} (e.g. flattening them "
                         "into the sequence, or a reduction over the wrong dimension)",
                         where=where, leak=leak, value='batch elements' if len(index) == 1 else 'heads'),
                       {"changed": where, "max_change_elsewhere": leak, "diagnosis": "batch_mixed"})
    return T("each batch element and head depends only on its own inputs")


def mha_batch(ctx):
    from .masks import mha_inputs
    B, L, S, H, dk = 3, 6, 7, 2, 4
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk, dtype=torch.float64)
    base = ctx.tensor_out(ctx.call(x_q, x_kv, *ws, H, during=T("batch probe")), (B, L, H * dk))
    b = ctx.inputs.randint(0, B - 1)
    x_q2, x_kv2 = x_q.clone(), x_kv.clone()
    x_q2[b] = ctx.inputs.randn(L, H * dk, dtype=torch.float64)
    x_kv2[b] = ctx.inputs.randn(S, H * dk, dtype=torch.float64)
    out = ctx.tensor_out(ctx.call(x_q2, x_kv2, *ws, H, during=T("batch probe")), (B, L, H * dk))
    others = [i for i in range(B) if i != b]
    leak = _changed(out[others], base[others])
    if not leak <= PROPERTY_TOLERANCE * max(1.0, float(base.abs().max())):
        raise Fail(T("changing batch element {b} changed the other elements' outputs by up "
                     "to {leak:.3g}: your computation mixes batch elements", b=b, leak=leak),
                   {"changed": b, "max_change_elsewhere": leak, "diagnosis": "batch_mixed"})
    return T("each batch element depends only on its own inputs")


def inputs_unchanged(ctx):
    """Every call so far came back with its inputs, which the parent compared with what it sent."""
    names = ctx.task.arg_names
    if not ctx.tensor_calls:
        raise Fail(T("not checked: no call returned an output of the expected shape"))
    if ctx.mutated:
        pretty = []
        for raw, check in ctx.mutated.items():
            label = names[int(raw[3:])] if raw.startswith("arg") and int(raw[3:]) < len(names) else raw
            pretty.append(f"{label} (first seen in {check})")
        raise Fail(T("your function modifies its inputs in place: {value}. Use out-of-place "
                     "operations (q = q / s, not q /= s; masked_fill, not masked_fill_)",
                     value=', '.join(pretty)),
                   {"mutated": sorted(ctx.mutated), "diagnosis": "inputs_modified"})
    return T("none of the inputs (or masks) was modified across {calls} calls", calls=ctx.calls)


def permutation(ctx):
    L, S, E, Ev = ctx.inputs.distinct(4, 5, 12)
    r = ctx.inputs.randn
    q, k, v = r(2, L, E, dtype=torch.float64), r(2, S, E, dtype=torch.float64), r(2, S, Ev, dtype=torch.float64)
    base = ctx.tensor_out(ctx.call(q, k, v, during=T("permutation probe")), (2, L, Ev))
    pk, pq = ctx.inputs.perm(S), ctx.inputs.perm(L)
    keys = ctx.tensor_out(ctx.call(q, k[:, pk], v[:, pk], during=T("permutation probe")), (2, L, Ev))
    if not _changed(keys, base) <= PROPERTY_TOLERANCE:
        raise Fail(T("permuting the keys and values together changed the output by "
                     "{value:.3g}; attention treats the keys as a set", value=_changed(keys, base)))
    queries = ctx.tensor_out(ctx.call(q[:, pq], k, v, during=T("permutation probe")), (2, L, Ev))
    if not _changed(queries, base[:, pq]) <= PROPERTY_TOLERANCE:
        raise Fail(T("permuting the queries should permute the output rows the same way; "
                     "yours does not"))
    return T("permuting keys with values changes nothing; permuting queries permutes the "
             "output")


def fully_masked(ctx):
    L, S = 6, 7
    r = ctx.inputs.randn
    q, k, v = r(1, L, 8, dtype=torch.float64), r(1, S, 8, dtype=torch.float64), r(1, S, 5, dtype=torch.float64)
    mask = ctx.inputs.bool_mask(1, L, S)
    row = ctx.inputs.randint(0, L - 1)
    mask[0, row] = False
    out = ctx.tensor_out(ctx.call(q, k, v, attn_mask=mask, during=T("fully masked row")), (1, L, 5))
    got = out[0, row].double()
    if torch.isnan(got).any():
        raise Fail(T("a query whose every key is masked (row {row}) gives NaN; the reference "
                     "(like PyTorch >= 2.5) gives zeros. Optional: not scored", row=row))
    if not float(got.abs().max()) == 0.0:
        raise Fail(T("a query whose every key is masked (row {row}) gives {value}...; the "
                     "reference gives zeros (a -1e9 fill attends uniformly instead). "
                     "Optional: not scored", row=row, value=got.tolist()[:3]))
    return T("a query with every key masked gives zeros, like the reference")
