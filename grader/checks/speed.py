"""``speed.relative`` (reported only): does the function's cost grow like a Python loop?

A time in milliseconds says little on a shared server: the same vectorised file read 28×, 73×
and 470× "the reference" as the grading host's load changed. So the verdict rests on what load
does not move:

- **CPU time, not wall time.** The parent reads, from the kernel, how long the child's threads
  ran during each call (``CallResult.cpu``, ``/proc/<tid>/schedstat``); waiting for a busy core
  is not in it. The baseline is timed the same way in the parent (``time.thread_time`` on one
  torch thread, as the child runs).
- **A baseline written as students write it**: two matmuls and a softmax, not the float64
  reference with its mask handling.
- **Growth, not level.** The function runs on a tiny case (one head of 4 queries and keys) and
  on two cases with the same tiny work per head and row but many more of them: 128 heads
  (B × H), and 128 queries and keys. Vectorised code does the same few operations whatever the
  count, so one call costs about what the tiny one did (1.0-1.8x, measured); a Python loop over
  the batch, the heads, the queries or the keys repeats its operations per item (14x-37x). A
  loop is named when the call grew ``LOOP_GROWTH`` times over its own tiny call *and* its extra
  cost exceeds the baseline's extra cost by ``LOOP_UNITS`` baseline tiny calls: the first keeps
  a cost every call pays whatever the size (printing, say, which varies from call to call) from
  passing for growth, the second keeps a fast tiny call's noise from doing so.
- **A steady cost every call pays does not hide a loop.** A file that makes every call cost the
  same extra work (burning CPU each time the harness reads its clock, say: ``time.perf_counter``
  replaced in the child) makes the tiny call as slow as a loop's, so the growth ratio stays low.
  What it cannot make is that cost vary the way a loop's does: the tiny call is timed twice a
  round, and a case whose extra cost is ``STEADY`` times the gap between the two least of those
  tiny times, and past ``STEADY_UNITS``, is a loop whatever the ratio. A cost that varies (the
  printing above) shows in that difference and keeps the ratio rule.
- **Interleaved, least of up to three.** Each round times the function and the baseline one
  after the other on every case, and the least time of each is kept (a spike of interference
  only ever adds time). Another round is run only while a case is near the line (``_decisive``):
  vectorised code and clear loops are decided by one. A case whose call already takes 50 ms is
  not repeated: it is a loop.

The time of one mid-sized call is still reported, next to the baseline's, as information.
"""
from __future__ import annotations

import math
import time

import torch

from .base import Fail
from ..i18n import T

# (B, H, L, S, E): the same tiny head everywhere, then many heads, then a long sequence
TINY = (1, 1, 4, 4, 8)
CASES = {"heads": (64, 2, 4, 4, 8), "sequence": (1, 1, 128, 128, 8)}
MAIN = (1, 2, 256, 256, 64)  # the reported time: mostly arithmetic, little transfer
ROUNDS = 3
DECISIVE_SECONDS = 0.05  # a call this slow on these sizes is not measured again
# A loop: the call grew this many times over its own tiny call, and cost this many baseline tiny
# calls more than the baseline's own growth. Measured over the corpus, idle and with both cores
# busy: vectorised files 0.8-1.8x and under 5 units; loops over the batch, heads or rows 14-37x
# and 130-540 units.
LOOP_GROWTH = 5.0
LOOP_UNITS = 12.0
# A loop under a steady per-call cost: the case's extra time is this many times the spread of the
# tiny call's own times (a row loop at 128 rows: 25 ms extra; repeated tiny calls: within 1 ms), and
# past this many baseline tiny calls. The spread can be a few microseconds, so the spread alone would
# name vectorised code that is merely heavier per element (float16 on a CPU: 4-10 units, growth
# 1.5-1.9x) a loop; row and batch loops add 130-540 units.
STEADY = 10.0
STEADY_UNITS = 4 * LOOP_UNITS


def plain_attention(q, k, v):
    # the way students write it: (..., L, E) @ (..., E, S) -> softmax over S -> @ (..., S, Ev)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v


def _baseline_seconds(q, k, v) -> float:
    """CPU time of the plain version here, on one torch thread (as the child runs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.thread_time()
        plain_attention(q, k, v)
        return time.thread_time() - start
    finally:
        torch.set_num_threads(threads)


def _call_seconds(ctx, r, shape, during) -> tuple[float, bool]:
    """The student's call on fresh inputs of ``shape``: (seconds, whether it is CPU time)."""
    B, H, L, S, E = shape
    q, k, v = r(B, H, L, E), r(B, H, S, E), r(B, H, S, E)
    result = ctx.call(q, k, v, during=during)
    ctx.tensor_out(result, (B, H, L, E))
    return (result.cpu, True) if result.cpu is not None else (result.wall, False)


def speed(ctx):
    # Inputs of their own: how many this check draws depends on the timings, and the checks
    # after it must meet the same inputs on every run.
    gen = torch.Generator().manual_seed(ctx.inputs.randint(0, 2**31 - 1))

    def r(*shape):
        return torch.randn(shape, generator=gen)

    during = T("timing")
    mine, base, cpu_clock, tiny = {}, {}, True, []
    calls_before = ctx.calls
    for round_ in range(ROUNDS):
        # the tiny call first and last: its two times show how steady a call's fixed cost is
        for name, shape in (("tiny", TINY), *CASES.items(), ("tiny", TINY)):
            if name != "tiny" and mine.get(name, 0.0) >= DECISIVE_SECONDS:
                continue
            seconds, is_cpu = _call_seconds(ctx, r, shape, during)
            cpu_clock &= is_cpu
            mine[name] = min(mine.get(name, math.inf), seconds)
            if name == "tiny":
                tiny.append(seconds)
            B, H, L, S, E = shape
            q, k, v = r(B, H, L, E), r(B, H, S, E), r(B, H, S, E)
            base[name] = min(base.get(name, math.inf), _baseline_seconds(q, k, v))
        if round_ == 0:
            calls_one_round = ctx.calls - calls_before
        growth, excess = _growth(mine, base)
        # how much the fixed cost varies: the gap between the two least tiny times, so that a spike
        # of interference in one of them (which only adds time) does not widen it, and another
        # round narrows it rather than widens it
        least, second = sorted(tiny)[:2]
        spread = second - least
        if all(_decisive(growth[name], excess[name], mine[name] - mine["tiny"], spread) for name in CASES):
            break  # another round could not change the verdict: every case is far from the line
    # How many rounds ran depends on the timings; the call counts other checks report must not.
    ctx.calls = calls_before + calls_one_round
    unit = max(base["tiny"], 1e-6)
    details = {"clock": "cpu" if cpu_clock else "wall", "unit_seconds": round(unit, 6),
               "tiny": {"shape": _shape(TINY), "seconds": round(mine["tiny"], 6),
                        "baseline_seconds": round(base["tiny"], 6), "spread_seconds": round(spread, 6)},
               "growth": {name: {"shape": _shape(CASES[name]), "seconds": round(mine[name], 6),
                                 "baseline_seconds": round(base[name], 6), "excess_units": round(excess[name], 1),
                                 "growth": round(growth[name], 1)}
                          for name in CASES}}
    looped = [name for name in CASES if _looped(growth[name], excess[name], mine[name] - mine["tiny"], spread)]
    if looped and ctx.device == "cpu":
        heads, length = CASES["heads"][0] * CASES["heads"][1], CASES["sequence"][2]
        if looped == ["heads"]:
            said = T("your function's time grows like a Python loop over the batch or the heads: with {heads} "
                     "heads instead of 1 (4 queries each) one call took {growth:.0f}× as long, where vectorised "
                     "code takes about the same time; compute every head at once with batched tensor operations "
                     "(optional: not scored)", heads=heads, growth=growth["heads"])
        elif looped == ["sequence"]:
            said = T("your function's time grows like a Python loop over the queries or the keys: with {length} "
                     "queries and keys instead of 4 one call took {growth:.0f}× as long, where vectorised code "
                     "takes about the same time; compute every query and key at once with batched tensor "
                     "operations (optional: not scored)", length=length, growth=growth["sequence"])
        else:
            said = T("your function's time grows like a Python loop over the batch, the heads and the sequence: "
                     "with {heads} heads instead of 1 one call took {heads_growth:.0f}× as long, with {length} "
                     "queries and keys instead of 4 {length_growth:.0f}× as long, where vectorised code takes "
                     "about the same time; use batched tensor operations over every dimension at once "
                     "(optional: not scored)", heads=heads, length=length,
                     heads_growth=growth["heads"], length_growth=growth["sequence"])
        if any(growth[name] < LOOP_GROWTH for name in looped):  # found by the steady rule: say why
            said = T("{said} (every call also costs a steady {fixed:.0f} ms whatever its size, which does not "
                     "hide the {extra:.0f} ms the loop adds)", said=said, fixed=mine["tiny"] * 1e3,
                     extra=max(mine[name] - mine["tiny"] for name in looped) * 1e3)
        raise Fail(said, details)
    # The time of one larger call, for information: its own (transfer to and from the sandbox
    # included) and the plain version's here, each the CPU time of the call.
    main_seconds, is_cpu = _call_seconds(ctx, r, MAIN, during)
    B, H, L, S, E = MAIN
    main_base = min(_baseline_seconds(r(B, H, L, E), r(B, H, S, E), r(B, H, S, E)) for _ in range(2))
    details.update({"seconds": round(main_seconds, 6), "reference_seconds": round(main_base, 6),
                    "ratio": round(main_seconds / main_base, 2) if main_base > 0 else None,
                    "shape": _shape(MAIN) + " float32"})
    clock = T("of CPU time") if is_cpu and cpu_clock else T("of wall time")
    return T("one call at B={B}, H={H}, L=S={L}, E={E} took {value:.1f} ms {clock}, passing the tensors to and "
             "from the sandbox included (two matmuls and a softmax: {baseline:.1f} ms here); its cost grows with "
             "the batch and the sequence as vectorised code does",
             B=B, H=H, L=L, E=E, value=main_seconds * 1e3, clock=clock, baseline=main_base * 1e3), details


def _growth(mine: dict, base: dict) -> tuple[dict, dict]:
    """Per case: how many times the function's tiny call one call took, and how much more it cost
    than the baseline's own growth, in baseline tiny calls."""
    unit = max(base["tiny"], 1e-6)
    growth = {name: mine[name] / max(mine["tiny"], 1e-9) for name in CASES}
    excess = {name: ((mine[name] - mine["tiny"]) - (base[name] - base["tiny"])) / unit for name in CASES}
    return growth, excess


def _looped(growth: float, excess: float, extra: float, spread: float) -> bool:
    """A loop: past ``LOOP_UNITS`` and grown ``LOOP_GROWTH`` times, or past ``STEADY_UNITS`` and
    ``STEADY`` times the tiny call's own spread (a steady per-call cost lowers the growth, not the
    extra time)."""
    return ((excess >= LOOP_UNITS and growth >= LOOP_GROWTH)
            or (excess >= STEADY_UNITS and extra >= STEADY * spread))


def _decisive(growth: float, excess: float, extra: float, spread: float) -> bool:
    """Far enough from both lines that no spike of interference could carry it across: a spike only
    adds time, to the tiny call (which lowers the growth and widens the spread) or to the case
    (which raises both). Far means past double every bound of a rule, or under half of one bound
    of each rule."""
    ratio_above = excess >= 2 * LOOP_UNITS and growth >= 2 * LOOP_GROWTH
    steady_above = excess >= 2 * STEADY_UNITS and extra >= 2 * STEADY * spread
    ratio_below = excess < LOOP_UNITS / 2 or growth < LOOP_GROWTH / 2
    steady_below = excess < STEADY_UNITS / 2 or extra < STEADY / 2 * spread
    return ratio_above or steady_above or (ratio_below and steady_below)


def _shape(shape) -> str:
    return "x".join(map(str, shape))
