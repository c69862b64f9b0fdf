"""Judging a call whose function returns several tensors (``Task.outputs`` > 1), written once.

A task gives the names and shapes of its outputs, its float64 and same-dtype references and
its known-bug variants; ``judge`` calls the student, compares every output with the tolerance
rule, and on a miss names the bug whose variant all the outputs together match.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .base import Fail, with_cause
from .tolerance import OUTPUT_MULTIPLIER, allowance, compare, relative_error
from .variants import identify
from ..i18n import T


@dataclass
class Outputs:
    """How one task's tuple is judged."""
    names: tuple                    # e.g. ("dQ", "dK", "dV")
    explain: Callable[[str], str]   # bug name -> the sentence for the student
    multiplier: float = OUTPUT_MULTIPLIER
    floor_factor: float = 1.0
    dtype_bug: str | None = None    # the named bug of outputs in another dtype than the inputs'


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.double().reshape(-1) for t in tensors])


def judge(ctx, spec: Outputs, args: tuple, kwargs: dict, *, shapes: list, ref64, same, variants: Callable,
          what: str, shape_hint: Callable | None = None) -> tuple:
    """Call, compare each output, diagnose. Returns (outputs, worst error); raises Fail on a miss.

    ``variants()`` is called only on a miss and returns {bug: tuple of tensors (or None)};
    ``shape_hint(name, shape)`` may name the bug a wrong output shape gives away.
    """
    result = ctx.call(*args, during=what, **kwargs)
    try:
        outs = ctx.tuple_out(result, shapes, spec.names, what)
    except Fail as miss:
        name, shape = miss.details.get("output"), miss.details.get("output_shape")
        cause = shape_hint(name, shape) if shape_hint and name and shape else None
        if cause:
            raise Fail(with_cause(miss.message, spec.explain(cause)),
                       {**miss.details, "diagnosis": cause}) from None
        raise
    dtype = args[0].dtype
    worst, failures = 0.0, []
    for name, out, r64, rs in zip(spec.names, outs, ref64, same):
        cmp = compare(out, r64, allowance(r64, rs, dtype, spec.multiplier, spec.floor_factor))
        worst = max(worst, cmp.max_error)
        if not cmp.ok:
            failures.append((name, cmp))
        elif out.dtype != dtype:
            raise Fail(T("{what}: your {name} is {got} for {want} inputs: return the inputs' dtype", what=what,
                         name=name, got=str(out.dtype).replace("torch.", ""), want=str(dtype).replace("torch.", "")),
                       {"output": name, "output_dtype": str(out.dtype), "diagnosis": spec.dtype_bug})
    if not failures:
        ctx.attention_seen = True
        return outs, worst
    # NaN in a variant is where that bug leaves a row with nothing to attend to: it matches NaN (or
    # zero) in the output there, never anything else (identify alone would take it as a wildcard,
    # and a variant that is mostly NaN would then match every output).
    candidates = {bug: torch.nan_to_num(flat(v), nan=0.0) for bug, v in variants().items()
                  if v is not None and all(a.shape == b.shape for a, b in zip(v, outs))}
    got = torch.nan_to_num(flat(outs), nan=0.0)
    cause = key_name(identify(got, candidates, relative_error(got, flat(ref64)), prefer=ctx.diagnoses))
    if cause:  # "bug:detail" -> bug, one of the bugs named so far
        ctx.attention_seen = True  # a named bug of this task: the function computes what the task is about
        if cause not in ctx.diagnoses:
            ctx.diagnoses.append(cause)
    name, cmp = failures[0]
    details = {"case": what, "wrong": [n for n, _ in failures], "diagnosis": cause, **cmp.details()}
    raise Fail(T("{what}: {wrong} wrong; {name}: {comparison}.{cause}", what=what,
                 wrong=", ".join(n for n, _ in failures), name=name, comparison=cmp.describe(),
                 cause=T(" Likely cause: {cause}.", cause=spec.explain(cause)) if cause else ""), details)


def dtype_case(dtype, make_args: Callable, spec: Outputs, shapes_of: Callable):
    """``dtype.*``: every output a tensor of the inputs' dtype and the expected shape. Values, NaN
    included, are the output checks' job: there a NaN is judged (and named) against the reference,
    so one bug that leaves a row with nothing to attend to is not charged twice."""
    def check(ctx):
        args = make_args(ctx, dtype)
        result = ctx.call(*args, during=T("{dtype} inputs", dtype=dtype))
        outs = ctx.tuple_out(result, shapes_of(args), spec.names)
        for name, out in zip(spec.names, outs):
            if out.dtype != dtype:
                raise Fail(T("for {want} inputs your {name} is {got}", want=str(dtype).replace("torch.", ""),
                             name=name, got=str(out.dtype).replace("torch.", "")),
                           {"output": name, "output_dtype": str(out.dtype), "diagnosis": spec.dtype_bug})
        return T("{count} {value} tensors of the expected shapes",
                 count=len(spec.names), value=str(dtype).replace('torch.', ''))
    return check


def assess_parts(ctx, spec: Outputs, result, dtype, *, shapes: list, ref64, same, variants: Callable, what: str,
                 parts: tuple | None = None, dtype_bug: str | None = None) -> tuple:
    """(outputs, worst error of the right parts, failures) for one call's ``result``; raises Fail only
    when no tuple of tensors came back, or a judged part has the wrong shape (``details["output"]``).

    Each failure is (name, cause or None, note, comparison). ``variants()`` is called only on a miss
    and returns {bug or "bug:value": tuple of tensors} (``key_name`` gives the bug of a key); a tuple
    of such callables is tried in order until one names the miss (the cheap kinds first);
    ``dtype_bug`` names the mistake of returning values right to the precision of another dtype
    than the inputs'.
    """
    parts = tuple(parts or spec.names)
    got = result.output
    if isinstance(got, tuple) and len(got) == len(shapes):  # the parts not judged may have any shape
        shapes = [s if n in parts or not isinstance(o, torch.Tensor) else tuple(o.shape)
                  for n, s, o in zip(spec.names, shapes, got)]
    outs = ctx.tuple_out(result, shapes, spec.names, what)
    worst, failures, candidates = 0.0, [], None
    for i, (name, out, r64, rs) in enumerate(zip(spec.names, outs, ref64, same)):
        if name not in parts:
            continue
        cmp = compare(out, r64, allowance(r64, rs, dtype, spec.multiplier, spec.floor_factor))
        if cmp.ok and out.dtype == dtype:
            worst = max(worst, cmp.max_error)
            continue
        if out.dtype != dtype and dtype_bug and (cmp.ok or compare(out, r64, allowance(
                r64, r64.to(out.dtype), out.dtype, spec.multiplier, spec.floor_factor)).ok):
            failures.append((name, dtype_bug, T("your {name} is {got} for {want} inputs", name=name,
                                                got=str(out.dtype).replace("torch.", ""),
                                                want=str(dtype).replace("torch.", "")), cmp))
            continue
        got_i, cause = torch.nan_to_num(out.double(), nan=0.0), None
        stages = variants if isinstance(variants, (tuple, list)) else (variants,)
        for stage, more in enumerate(stages):  # the cheaper kinds of known bug first
            if candidates is None or len(candidates) <= stage:
                candidates = (candidates or []) + [{key: v for key, v in more().items() if v is not None}]
            options = {key: torch.nan_to_num(v[i].double(), nan=0.0) for key, v in candidates[stage].items()
                       if v[i].shape == out.shape}
            cause = key_name(identify(got_i, options, relative_error(got_i, r64), prefer=ctx.diagnoses))
            if cause:
                if cause not in ctx.diagnoses:
                    ctx.diagnoses.append(cause)
                break
        failures.append((name, cause, T("{name}: {comparison}", name=name, comparison=cmp.describe()), cmp))
    if len(failures) < len(parts) or any(cause for _, cause, _, _ in failures):
        ctx.attention_seen = True  # right, or a named bug of this task: it computes what the task is about
    return outs, worst, failures


def parts_failure(what, failures: list, *, explain: Callable | None = None, prefix: str = "") -> Fail:
    """The Fail for ``assess_parts``' failures: the wrong parts, and the first named cause."""
    causes = {name: cause for name, cause, _, _ in failures if cause}
    first = next(iter(causes.values()), None)
    joined = failures[0][2]
    for _, _, note, _ in failures[1:]:
        joined = T("{first}; {second}", first=joined, second=note)
    cause_text = T(" Likely cause: {cause}.", cause=explain(first)) if first and explain else ""
    return Fail(T("{what}: {prefix}{wrong} wrong ({notes}).{cause}", what=what, prefix=prefix,
                  wrong=", ".join(name for name, *_ in failures), notes=joined, cause=cause_text),
                {"case": what, "wrong": [name for name, *_ in failures], "diagnosis": first, "causes": causes,
                 **failures[0][3].details()})


def key_name(key: str | None) -> str | None:
    """A variant's key without its parameter ("dk_overwritten:4" is the bug "dk_overwritten")."""
    return key.split(":", 1)[0] if key else key
