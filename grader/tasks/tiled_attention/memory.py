"""The memory checks of ``tiled_attention``, measured by the parent from the run's cgroup.

Each call runs in a child of its own (``Context.call(fresh_child=True)``): its peak covers the
file's import and the call, so a buffer allocated at import and filled with ``out=`` during the
call counts, and no memory an earlier check left in the allocator can be reused unseen. The
child's allocator returns freed blocks to the kernel at once (``harness._lean_allocator``): a
loop over 16 MiB blocks was measured at 295-375 MiB with glibc's defaults and 68 MiB with them.

* ``memory.long_sequence``: L = 4096, S = 8192, E = 64, float32, block_size 256. One L×S float32
  score matrix is 128 MiB; growing by that much fails. Measured at L = S = 8192 (256 MiB matrix):
  a key loop 52 MiB, query blocks with key blocks inside 28, fixed 32×32 tiles 24, query chunks
  of 512 rows with whole key rows 68; the full matrix 533, a 256 MiB buffer made at import 281.
  L = 4096 halves the tiles a file with fixed small tiles loops over (65,536 of 16 × 16).
* ``online.key_streaming``: L = 64, S = 2¹⁹, E = Ev = 1, float32, block_size 1024. One query's
  row of scores over all keys is 2 MiB; a loop over key blocks holds L × block_size scores
  (256 KiB). A plain softmax over whole key rows for chunks of c query rows holds about
  4 MiB × c (scores and probabilities). Allowance 132 MiB here (``stream_allowance``). Measured:
  returning zeros 15.6 MiB, a key loop 17.0, float64 throughout 27.5, fixed 32 × 64 tiles 16.1,
  torch.split into fixed 32-key tiles 85.5 (64-key: 75.8; its view objects), query chunks of
  1024 rows × key chunks summarised 72.2; chunks of 8, 16, 32 and 64 query rows with whole key
  rows 62.6, 110.5, 206.5 and 270.7. Chunks of 32 rows or more fail; smaller chunks cannot be
  told by memory from honest copies of the keys and per-tile bookkeeping.
"""
from __future__ import annotations

import torch

from reference_impl import scaled_dot_product_attention
from ...checks.base import Fail, StudentFailure
from .bugs import BUGS, explain, online
from ...checks.tolerance import allowance, compare, relative_error
from ...checks.variants import identify
from ...i18n import T

MiB = 1 << 20
LONG_L, LONG_S, LONG_E, LONG_BLOCK = 4096, 8192, 64, 256  # memory.long_sequence
STREAM_L, STREAM_S, STREAM_BLOCK = 64, 1 << 19, 1024  # online.key_streaming (E = Ev = 1)
SAMPLED_ROWS = 8
# Each memory case's budget of the student's own time. Fixed 16 × 16 tiles (a public CS336 solution)
# need 131,072 tiles on the long case: measured 5.9 s for 65,536 32 × 32 tiles at a load of 18 on
# 2 cores (2.0 s for 64 × 64), so 16 × 16 need about 12 s there; the default 8 s would time them out.
SECONDS = 20.0


def _measured_call(ctx, q, k, v, block, what):
    """The call in a child of its own (on the CPU even on a GPU worker: the cgroup counts host
    memory), its output checked on sampled rows. A call that ran out of memory fails here."""
    try:
        result = ctx.call(q, k, v, block, fresh_child=True, run_on="cpu", during=what)
    except StudentFailure as exc:
        if exc.error.kind != "memory":
            raise
        return None
    out = ctx.tensor_out(result, q.shape[:-1] + (v.size(-1),), what)
    rows = ctx.inputs.perm(q.size(-2))[:SAMPLED_ROWS]
    ref64 = online(q[:, rows], k, v, 1 << 16)
    cmp = compare(out[:, rows], ref64, allowance(ref64, online(q[:, rows].float(), k, v, 1 << 16).float(), q.dtype))
    if not cmp.ok:
        details = cmp.details()
        known = {b: online(q[:, rows], k, v, block, b, length=q.size(-2)) for b in ctx.diagnoses if b in BUGS}
        cause = identify(out[:, rows], known, relative_error(out[:, rows], ref64)) if known else None
        if cause:  # the bug the other checks named, at this size too: not charged again
            details["diagnosis"] = cause
        raise Fail(T("{what}: on {n} sampled rows, {comparison}{cause}", what=what, n=SAMPLED_ROWS,
                     comparison=cmp.describe(),
                     cause=T(". Likely cause: {cause}", cause=explain(cause)) if cause else ""), details)
    return result


def long_sequence(ctx):
    """L = S = 8192: a full score matrix (or a buffer of its size made at import) fails."""
    r = ctx.inputs.randn
    q, k, v = r(1, LONG_L, LONG_E), r(1, LONG_S, LONG_E), r(1, LONG_S, LONG_E)
    what = T("L = {L}, S = {S}, E = {E}, float32, block_size={block}", L=LONG_L, S=LONG_S, E=LONG_E, block=LONG_BLOCK)
    full = LONG_L * LONG_S * 4
    result = _measured_call(ctx, q, k, v, LONG_BLOCK, what)
    if result is None:
        raise Fail(T("{what}: your function ran out of memory; one L×S float32 score matrix is {value2} MiB: "
                     "process the keys in blocks and never build the full matrix", what=what,
                     value2=full // MiB), {"measured": True, "out_of_memory": True})
    peak = result.memory_peak
    if peak is None:
        return (T("output right on {what}; peak memory not measured: this sandbox has no "
                  "cgroup to read (the server measures it and fails a full {value} MiB score "
                  "matrix)", what=what, value=full // MiB)), {"measured": False}
    details = {"measured": True, "peak_mib": round(peak / MiB, 1), "full_scores_mib": full // MiB}
    if peak >= full:  # holding one full score matrix costs at least this much
        raise Fail(T("{what}: your run's memory grew by {value:.0f} MiB from before your file was imported "
                     "to the end of the call (measured by the grader from your run's cgroup; memory your "
                     "file takes at import counts too); one L×S float32 score matrix is {value2} MiB: "
                     "process the keys in blocks and never build the full matrix",
                     what=what, value=peak / MiB, value2=full // MiB), details)
    return T("{what}: memory grew by {value:.0f} MiB (a full score matrix is {value2} MiB)",
             what=what, value=peak / MiB, value2=full // MiB), details


def stream_allowance(q, k, v) -> int:
    """What a loop over key blocks may hold on the key-streaming case: its inputs and output twice
    (as received and as built), 24 MiB, and 200 bytes per key: copies of the keys and values (three
    in float64 are 48 bytes a key here) and the bookkeeping of small fixed tiles (torch.split into
    32-key tiles makes a view object per tile: about 80 bytes a key)."""
    received = sum(t.numel() * t.element_size() for t in (q, k, v)) + q[..., :1].numel() * v.size(-1) * 4
    return 2 * received + 24 * MiB + 200 * k.size(-2)


def key_streaming(ctx):
    """L = 64 queries, S = 2¹⁹ keys: one query's row of scores over every key is 2 MiB. Only a loop
    over the keys (an online softmax) stays within the allowance; a softmax over whole key rows for
    chunks of query rows does not. Gates the ``online`` family."""
    r = ctx.inputs.randn
    q, k, v = r(1, STREAM_L, 1), r(1, STREAM_S, 1), r(1, STREAM_S, 1)  # E = Ev = 1: the keys cost least
    what = T("L = {L}, S = {S:,}, E = 1, float32, block_size={block}", L=STREAM_L, S=STREAM_S, block=STREAM_BLOCK)
    row = STREAM_S * 4
    allowed = stream_allowance(q, k, v)
    sizes = dict(what=what, row=row // MiB, allowed=allowed // MiB, blocks=STREAM_L * STREAM_BLOCK * 4 // 1024)
    result = _measured_call(ctx, q, k, v, STREAM_BLOCK, what)
    if result is None:
        raise Fail(_skipped(T("your function ran out of memory"), sizes), {"measured": True, "out_of_memory": True})
    peak = result.memory_peak
    if peak is None:
        return T("output right on {what}; memory not measured: this sandbox has no cgroup to read (the server "
                 "measures it: a softmax over whole rows of keys fails there)", what=what), {"measured": False}
    details = {"measured": True, "peak_mib": round(peak / MiB, 1), "allowed_mib": round(allowed / MiB, 1),
               "row_mib": row // MiB}
    if peak > allowed:
        raise Fail(_skipped(T("your run's memory grew by {value:.0f} MiB (measured by the grader from your run's "
                              "cgroup)", value=peak / MiB), sizes), details)
    return T("{what}: memory grew by {value:.0f} MiB (allowed {allowed} MiB; one query's row of scores over "
             "all keys is {row} MiB): you stream over the keys", value=peak / MiB, **sizes), details


def _skipped(problem, sizes) -> T:
    return T("{what}: {problem}, over the {allowed} MiB allowed. One query's row of scores over all keys is "
             "{row} MiB here, and a loop over key blocks of block_size holds {blocks} KiB of scores: you "
             "computed whole rows of scores (a softmax over every key at once, for chunks of query rows) "
             "and skipped the online softmax's streaming over the keys. Take the keys block by block and "
             "keep a running maximum, normaliser and accumulator; until you do, the online family scores "
             "nothing", problem=problem, **sizes)
