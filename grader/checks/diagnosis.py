"""Naming a bug no catalogue entry matched: by what differs, and where.

The catalogues (``variants``, ``backward_bugs``, ``decoder_bugs``, ``tiled_bugs``) name a miss
when the output equals the reference with exactly one known bug applied. Real code often makes a
mistake they lack, or two at once, or crashes on some inputs only. After the checks have run,
``name_the_rest`` looks at every failing check that is still unexplained, in this order:

- a crash: the input property (``input_space``: a dtype, a length, a mask kind, a padding
  pattern) that every call that raised had and no call that answered had;
- a constant ratio between the student's values and the right ones, per output (dQ and dK
  exactly 1/N of autograd's: a division by the batch size), matched to the case's sizes;
- the scale the outputs were computed with (1/√Ev instead of 1/√E), tried among the case's sizes;
- two catalogue bugs at once (a scale bug and a mask bug);
- where the wrong values lie: only padded rows, only the last query rows (a last tile cut short),
  only some batch elements or heads, only the rows that have future keys to hide.

Everything is computed here in the parent, in float64, from the inputs it drew and the answers the
child returned (``Context.answers``); a name found here explains a failure, it never changes a
verdict: the check failed on its own. Each name is charged like a catalogue bug (causes.py).
"""
from __future__ import annotations

import math

import torch

from reference_impl import multi_head_attention, scaled_dot_product_attention
from .base import with_cause
from .variants import attend, explain
from ..i18n import T

PARTS = {"sdpa": ("your output",), "mha": ("your output",), "tiled_attention": ("your output",),
         "sdpa_backward": ("dQ", "dK", "dV"), "decoder_attention": ("self_out", "cross_out"),
         "kv_cache_attention": ("output", "k_cache", "v_cache")}
# Kinds whose name shows the function computes attention (with a wrong factor, or right in part).
SHOWS_ATTENTION = {"constant_ratio", "effective_scale", "padded_rows_wrong", "last_rows_wrong",
                   "future_rows_wrong", "some_batches_wrong"}
EXACT = 1e-4     # relative residual under which "the same values up to X" holds (float32 answers)
WRONG = 1e-4     # relative error above which an element is wrong


def _up(t):
    return t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def attention_reference(args, kwargs, scale=None) -> tuple:
    """``sdpa``'s and ``tiled_attention``'s right answer to one call, in float64 (``scale``: with
    another scale): the tasks' ``Grading.reference``."""
    q, k, v = map(_up, args[:3])
    s = kwargs.get("scale") if scale is None else scale
    return (scaled_dot_product_attention(q, k, v, _up(kwargs.get("attn_mask")), is_causal=bool(kwargs.get("is_causal")),
                                         scale=s),)


def mha_reference(args, kwargs, scale=None) -> tuple | None:
    """``mha``'s right answer to one call, in float64 (its scale is fixed by its width: none other)."""
    if scale is not None:
        return None
    return (multi_head_attention(*map(_up, args[:6]), args[6], _up(kwargs.get("attn_mask")),
                                 bool(kwargs.get("is_causal"))),)


def reference(task, args, kwargs, scale=None) -> tuple | None:
    """The task's right answer to one call, in float64 (``scale``: with another scale), from the
    task's own ``Grading.reference``; None where it has none."""
    hook = task.reference
    return hook(args, kwargs, scale) if hook else None


def _parts(output) -> tuple:
    return output if isinstance(output, tuple) else (output,)


def _rel(a, b) -> float:
    a, b = a.double(), b.double()
    if a.shape != b.shape:
        return float("inf")
    if not torch.isfinite(a).all():
        return float("inf")
    return float((a - b).abs().max()) / max(1.0, float(b.abs().max()))


# ---- what sizes a factor may come from ------------------------------------------------------
def sizes(task_id, args) -> list[tuple]:
    """(name, value) of the case's sizes a wrong factor may be: batch dims, lengths, widths."""
    out = []
    if task_id in ("sdpa", "sdpa_backward", "tiled_attention"):
        q, k, v = args[:3]
        for i, n in enumerate(q.shape[:-2]):
            out.append((T("the batch dimension {index} ({n})", index=i, n=n), n))
        if q.dim() > 3:
            out.append((T("the number of batch rows ({n})", n=q.shape[:-2].numel()), q.shape[:-2].numel()))
        out += [(T("L ({n})", n=q.size(-2)), q.size(-2)), (T("S ({n})", n=k.size(-2)), k.size(-2)),
                (T("E ({n})", n=q.size(-1)), q.size(-1)), (T("Ev ({n})", n=v.size(-1)), v.size(-1))]
    elif task_id == "mha":
        x_q, x_kv, h = args[0], args[1], args[6]
        out += [(T("the batch size ({n})", n=x_q.size(0)), x_q.size(0)), (T("L ({n})", n=x_q.size(1)), x_q.size(1)),
                (T("S ({n})", n=x_kv.size(1)), x_kv.size(1)), (T("d_model ({n})", n=x_q.size(2)), x_q.size(2)),
                (T("num_heads ({n})", n=h), h), (T("d_k ({n})", n=x_q.size(2) // h), x_q.size(2) // h)]
    elif task_id == "decoder_attention":
        t, m = args[0], args[1]
        out += [(T("the batch size ({n})", n=t.size(0)), t.size(0)), (T("T ({n})", n=t.size(1)), t.size(1)),
                (T("S ({n})", n=m.size(1)), m.size(1)), (T("D ({n})", n=t.size(2)), t.size(2))]
    return out


def _factor_name(task_id, args, r: float):
    """Words for a ratio r: "1/N (a division by the batch size N)" when it is one of the sizes."""
    for name, n in sizes(task_id, args):
        for value, words in ((n, T("× {what}", what=name)), (1 / n, T("÷ {what}", what=name)),
                             (math.sqrt(n), T("× √{what}", what=name)), (1 / math.sqrt(n), T("÷ √{what}", what=name))):
            if n > 1 and abs(r - value) <= 1e-3 * abs(value):
                return words
    return None


# ---- the kinds of diagnosis ------------------------------------------------------------------
def constant_ratio(task_id, args, outs, refs):
    """The wrong parts are all one constant times the right ones: (name, explanation) or None."""
    names = PARTS.get(task_id, ())
    found = []
    for name, o, f in zip(names, outs, refs):
        if _rel(o, f) <= WRONG:
            continue
        o, f = o.double(), f.double()
        if not torch.isfinite(o).all() or float((f * f).sum()) == 0:
            return None
        r = float((o * f).sum() / (f * f).sum())
        if abs(r) < 1e-6 or _rel(o, r * f) > EXACT:
            return None
        found.append((name, r))
    if not found or len({round(r, 6) for _, r in found}) != 1:
        return None
    r = found[0][1]
    words = _factor_name(task_id, args, r)
    if words is None and abs(r - 1) < 1e-2:
        return None  # within a percent of 1 and no size's: rounding (half precision), not a factor anyone wrote
    which = ", ".join(n for n, _ in found)
    text = T("{parts}: exactly {ratio:.4g} times the right values, {factor}: a factor that does not belong "
             "there (or one left out)", parts=which, ratio=r, factor=words) if words else \
        T("{parts}: exactly {ratio:.4g} times the right values: a constant factor that does not belong there "
          "(or one left out)", parts=which, ratio=r)
    return "constant_ratio", text


def effective_scale(task_id, args, kwargs, outs, reference=attention_reference):
    """The outputs are the right ones computed with another scale, one of the case's sizes'
    (``reference(args, kwargs, scale)``: the task's right answer with that scale)."""
    if task_id not in ("sdpa", "sdpa_backward", "tiled_attention") or kwargs.get("scale") is not None:
        return None
    E = args[0].size(-1)
    # the widths and lengths before the batch sizes: a scale by √(batch) is the less likely mistake
    for name, n in sorted(sizes(task_id, args), key=lambda pair: pair[0].template.startswith("the ")):
        for value, words in ((1 / math.sqrt(n), T("1/√{what}", what=name)), (1 / n, T("1/{what}", what=name)),
                             (1.0, T("1 (no scale)")), (math.sqrt(n), T("√{what}", what=name))):
            if abs(value - 1 / math.sqrt(E)) < 1e-9:
                continue
            refs = reference(args, kwargs, scale=value)
            if refs is not None and all(_rel(o, f) <= EXACT for o, f in zip(outs, refs)):
                return "effective_scale", T("your scores are scaled by {found} = {value:.4g}, not by 1/√E = "
                                            "1/√{E} = {want:.4g}", found=words, value=value, E=E,
                                            want=1 / math.sqrt(E))
    return None


# Mask mistakes to pair with a scale mistake (sdpa): keyword arguments of ``variants.attend``.
def _mask_mistakes(kwargs, L, S):
    mask, causal = kwargs.get("attn_mask"), kwargs.get("is_causal")
    if causal:
        tri = torch.ones(L, S, dtype=torch.bool)
        return {"causal_diagonal": {"keep": tri.tril(-1)}, "causal_bottom_right": {"keep": tri.tril(S - L)},
                "causal_ignored": {}, "causal_reversed": {"keep": tri.triu()}}
    if mask is not None and mask.dtype == torch.bool:
        return {"mask_polarity": {"keep": ~mask}, "masked_fill_zero": {"keep": mask, "fill": 0.0},
                "mask_multiply": {"keep": mask, "multiply_mask": True}, "mask_ignored": {},
                "mask_after_softmax": {"after_softmax_mask": mask.double()},
                "bool_mask_added": {"additive": mask.double()}}
    if mask is not None:
        f = mask.double()
        return {"float_mask_ignored": {}, "float_mask_scaled": {"additive": f, "additive_before_scale": True},
                "float_mask_as_bool": {"keep": f != float("-inf")}}
    return {}


SCALE_MISTAKES = {"no_scale": lambda E, Ev: 1.0, "scale_dk": lambda E, Ev: 1 / E,
                  "scale_sqrt_mult": lambda E, Ev: math.sqrt(E), "scale_dv": lambda E, Ev: 1 / math.sqrt(Ev),
                  "scale_constant": lambda E, Ev: 1 / 8}


def two_bugs(task_id, args, kwargs, outs):
    """A scale mistake and a mask mistake at once (sdpa): the two catalogue names."""
    if task_id != "sdpa" or kwargs.get("scale") is not None:
        return None
    q, k, v = (a.double() for a in args[:3])
    E, Ev, L, S = q.size(-1), v.size(-1), q.size(-2), k.size(-2)
    for mask_bug, mask_kw in _mask_mistakes(kwargs, L, S).items():
        for scale_bug, rule in SCALE_MISTAKES.items():
            if scale_bug == "scale_dv" and Ev == E:
                continue
            out = attend(q, k, v, rule(E, Ev), **mask_kw)
            if _rel(outs[0], out) <= EXACT:
                return f"{scale_bug}+{mask_bug}", T("two bugs at once: {first}; and {second}",
                                                    first=explain(scale_bug), second=explain(mask_bug))
    return None


def where_wrong(task_id, args, kwargs, outs, refs):
    """Where the wrong values lie, when that is a pattern a bug leaves."""
    names = PARTS.get(task_id, ())
    for name, o, f in zip(names, outs, refs):
        if o.shape != f.shape:
            return None
        bad = ~torch.isfinite(o.double()) | ((o.double() - f).abs() > WRONG * max(1.0, float(f.abs().max())))
        if not bad.any():
            continue
        rows = bad.any(-1)                                   # (..., L): a wrong row
        L = rows.size(-1)
        flat = rows.reshape(-1, L)
        if task_id == "decoder_attention":
            t_len = args[2]
            padded = torch.arange(L)[None, :] >= t_len[:, None]  # (B, T)
            if bool((flat <= padded).all()):
                return "padded_rows_wrong", T("{name} is wrong only at padded target positions (i >= "
                                              "target_lengths[b]): those rows must be zero", name=name)
        any_row = flat.any(0)
        first = int(any_row.nonzero()[0])
        # Right in at least half the rows: a cut-short tail. Right only in the first rows (causal row 0
        # sees key 0 alone, so any function returning v[0] gets it right) shows no attention.
        if first > 0 and 2 * first >= L and bool(any_row[first:].all()):
            return "last_rows_wrong", T("{name} is wrong only in the last {n} query rows (positions {first} to "
                                        "{last}) and right before them: the last tile of queries is cut short "
                                        "or skipped when L is not a multiple of the tile", name=name,
                                        n=L - first, first=first, last=L - 1)
        if kwargs.get("is_causal") and not bool(any_row[-1]) and bool(any_row[:-1].any()):
            return "future_rows_wrong", T("{name} is right in the last query row, which may see every key, and "
                                          "wrong in rows that have future keys to hide: the causal mask is not "
                                          "the top-left ones(L, S).tril()", name=name)
        lead = bad.reshape(*bad.shape[:-2], -1).any(-1)      # (...): a wrong batch element / head
        if lead.dim() >= 1 and lead.numel() > 1 and not bool(lead.all()):
            where = [list(map(int, i)) for i in lead.nonzero()[:4]]
            return "some_batches_wrong", T("{name} is wrong only at batch (and head) indices {where} and right "
                                           "at the others: some batch elements or heads are mixed up or "
                                           "overwritten", name=name, where=where)
        return None
    return None


LARGE = ("float32 above 88.7", "float64 above 709.8", "float64 beyond float32's range")


def overflowed(ctx, args, kwargs, outs, refs) -> bool:
    """NaN or inf where the reference is finite, on logits past exp()'s overflow, in a function
    whose answers to the output checks' calls without such logits were all finite: the size of the
    scores broke it."""
    from .input_space import describe as describe_call
    bad = any(bool((torch.isfinite(f) & ~torch.isfinite(o.double())).any()) for o, f in zip(outs, refs))
    if not bad or not set(describe_call(ctx, args, kwargs).get("logits", ())) & set(LARGE):
        return False
    calm = [out for cid, a, k, out in ctx.answers  # the output checks' ordinary cases
            if cid.startswith("output.") and not set(describe_call(ctx, a, k).get("logits", ())) & set(LARGE)]
    return bool(calm) and all(isinstance(t, torch.Tensor) and bool(torch.isfinite(t).all())
                              for out in calm for t in _parts(out))


def crash_property(calls, check_id):
    """The input property every call of ``check_id`` that raised had, and no answered call had."""
    failed = [(props, err) for cid, props, err in calls if cid == check_id and err]
    if not failed:
        return None
    answered = [props for _, props, err in calls if not err]
    if not answered:  # it raises on every input: no property sets the raising calls apart
        return None
    common = None
    for props, _ in failed:
        mine = {(axis, label) for axis, labels in props.items() for label in labels}
        common = mine if common is None else common & mine
    alone = [(axis, label) for axis, label in sorted(common or ())
             if not any(label in props.get(axis, ()) for props in answered)]
    if not alone:
        return None
    # Of several such properties (batch = 1 and float64, on a check that drew one call), the one every
    # call that raised anywhere had: one trigger for the whole file, not one per check.
    everywhere = None
    for _, props, err in calls:
        if err:
            mine = {(axis, label) for axis, labels in props.items() for label in labels}
            everywhere = mine if everywhere is None else everywhere & mine
    alone.sort(key=lambda prop: prop not in everywhere)
    exc, message = failed[0][1]
    said = ", ".join(f"{axis} = {label}" for axis, label in alone)
    return f"crash_on:{alone[0][0]}={alone[0][1]}", T("your function raises {exc} whenever the inputs have {property}, "
                                                       "and answers on every other input: {message}", exc=exc,
                                                       property=said, message=str(message)[:160])


# ---- the hook ------------------------------------------------------------------------------
def name_the_rest(checks: list, ctx, task) -> None:
    """Give each failing, unexplained scored check a name found here (``details["diagnosis"]`` and
    ``details["explanation"]``), where one fits."""
    task_id = task.id
    if task_id not in PARTS:
        return
    for c in checks:
        if c.passed or not c.max_points or c.details.get("diagnosis") or c.details.get("skipped") \
                or c.id.split(".")[0] in ("forbidden", "load", "inputs"):
            continue
        try:
            found = _diagnose(ctx, task, c)
        except Exception:  # a diagnosis is an extra: the verdict stands without it
            found = None
        if found and found[0].split(":")[0].split("+")[0] in SHOWS_ATTENTION | set(SCALE_MISTAKES):
            # the outputs are attention, scaled, or right in part: the function computes attention
            ctx.attention_seen = True
        elif found and c.id.split(".")[0] == "output" and not ctx.attention_seen:
            # A crash's trigger, a dtype, a cut gradient or an overflow says nothing about whether the
            # function computes attention: named on an output check, it would open the other families.
            found = None
        if found:
            c.details["diagnosis"], c.details["explanation"] = found
            c.message = with_cause(c.message, found[1])


def _diagnose(ctx, task, check):
    task_id = task.id
    if check.details.get("error_kind"):
        return crash_property(ctx.drawn, check.id)
    if check.details.get("no_gradient"):
        return "gradient_cut", explain("gradient_cut")
    if check.details.get("output_dtype") and check.details.get("expected_dtype"):
        return "output_dtype", explain("output_dtype")
    family = check.id.split(".")[0]
    mine = [a for a in ctx.answers if a[0] == check.id]
    # A check that judged answers another check of its family asked for (sdpa_backward's
    # output.dQ, output.dK and output.dV share their cases) has none of its own.
    for cid, args, kwargs, output in mine or [a for a in ctx.answers if a[0].split(".")[0] == family]:
        refs = reference(task, args, kwargs)
        outs = _parts(output)
        if refs is None or len(outs) != len(refs) or \
                not all(isinstance(o, torch.Tensor) and o.shape == f.shape for o, f in zip(outs, refs)):
            continue
        if all(_rel(o, f) <= WRONG for o, f in zip(outs, refs)):
            continue  # this call was right: look at the next
        if overflowed(ctx, args, kwargs, outs, refs):
            return "overflow_in_softmax", explain("overflow_in_softmax")
        for kind in (lambda: constant_ratio(task_id, args, outs, refs),
                     lambda: effective_scale(task_id, args, kwargs, outs, task.reference),
                     lambda: two_bugs(task_id, args, kwargs, outs),
                     lambda: where_wrong(task_id, args, kwargs, outs, refs)):
            found = kind()
            if found:
                return found
        return None
    return None
