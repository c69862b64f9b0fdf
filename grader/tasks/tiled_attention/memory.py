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
* ``online.key_streaming``: L = 128, S = 2¹⁵, E = Ev = 384, float32, block_size 1024, the keys
  and values handed over as streamed tensors (``grader/sandbox/streams.py``) that exist only as the
  function takes them, block by block. Each is 48 MiB whole; the allowance (``stream_allowance``)
  is about 47 MiB, which holds no whole copy of either. Measured: Rabe and Staats's chunks, which
  keep one summary per key block, 37 MiB (the most of the correct corpus, 19.5-30.7 MiB at
  E = Ev = 256); whole key rows and the full score matrix 146 MiB at 256; one query row at a time
  with whole key rows makes all the keys for every row and runs out of time. A softmax over whole rows of keys (query
  chunks of 64 rows: 85/100 before; one row at a time: 100/100 before) makes every key and fails.
  What a right output within the allowance shows, whatever the child does with the class, is that
  the keys were never held whole: streaming over them, in one pass or several.
"""
from __future__ import annotations

import torch

from reference_impl import scaled_dot_product_attention
from ...sandbox import streams
from ...checks.base import Fail, StudentFailure
from .bugs import BUGS, explain, online
from ...checks.tolerance import allowance, compare, relative_error
from ...checks.variants import identify
from ...i18n import T

MiB = 1 << 20
LONG_L, LONG_S, LONG_E, LONG_BLOCK = 4096, 8192, 64, 256  # memory.long_sequence
STREAM_L, STREAM_S, STREAM_E, STREAM_BLOCK = 128, 1 << 15, 384, 1024  # online.key_streaming (E = Ev)
SAMPLED_ROWS = 8
# Each memory case's budget of the student's own time. Fixed 16 × 16 tiles (a public CS336 solution)
# need 131,072 tiles on the long case: measured 5.9 s for 65,536 32 × 32 tiles at a load of 18 on
# 2 cores (2.0 s for 64 × 64), so 16 × 16 need about 12 s there; the default 8 s would time them out.
SECONDS = 20.0


def _measured_call(ctx, q, k, v, block, what, sent=None):
    """The call in a child of its own (on the CPU even on a GPU worker: the cgroup counts host
    memory), its output checked on sampled rows. A call that ran out of memory fails here.
    ``sent``: what the child gets in place of (q, k, v), the parent keeping k and v for its reference."""
    try:
        result = ctx.call(*(sent or (q, k, v)), block, fresh_child=True, run_on="cpu", during=what)
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
        said = explain(cause) if cause else None
        if not cause:
            # Attention with another scale (1/E, 1/√Ev): what diagnosis.py names on the output checks
            # once every check has run. Named here, it is that bug at this size too, and the families
            # this check gates are not closed by a failure the output checks already charge.
            from ...checks.diagnosis import effective_scale
            found = effective_scale("tiled_attention", (q[:, rows], k, v, block), {}, (out[:, rows],))
            if found:
                cause, said = found
                details["explanation"] = said
        if cause:  # the bug the other checks named, at this size too: not charged again
            details["diagnosis"] = cause
        raise Fail(T("{what}: on {n} sampled rows, {comparison}{cause}", what=what, n=SAMPLED_ROWS,
                     comparison=cmp.describe(),
                     cause=T(". Likely cause: {cause}", cause=said) if cause else ""), details)
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
    """What a loop over key blocks may hold on the key-streaming case: its query and output twice
    (as received and as built), 40 MiB, and 200 bytes per key: the bookkeeping of small fixed tiles
    (torch.split into 16-key tiles makes a tensor object per tile) and per-block summaries. The keys
    and values themselves are made block by block in the child, so no copy of them is allowed for."""
    received = q.numel() * q.element_size() + q[..., :1].numel() * v.size(-1) * 4
    return 2 * received + 40 * MiB + 200 * k.size(-2)


def key_streaming(ctx):
    """L = 128 queries, S = 2¹⁵ keys of width 384: the keys alone are 48 MiB, and so are the values.
    The child gets them as streamed tensors (``grader/sandbox/streams.py``), made block by block
    as the function slices or splits them; the allowance (about 47 MiB) holds no whole copy of
    either. Only a function that takes the keys in blocks stays within it (an online softmax, or a
    softmax in several passes over the key blocks); a softmax over whole rows of keys, for chunks
    of query rows or one row at a time, makes every key first. Gates the skill's families."""
    r = ctx.inputs.randn
    q = r(1, STREAM_L, STREAM_E)
    seed = int(ctx.inputs.perm(1 << 20)[0]) + 1
    specs = [{"seed": seed + i, "length": STREAM_S, "width": STREAM_E} for i in (0, 1)]
    k, v = streams.whole(specs[0]), streams.whole(specs[1])
    what = T("L = {L}, S = {S:,}, E = Ev = {E}, float32, block_size={block}, keys and values made block by block",
             L=STREAM_L, S=STREAM_S, E=STREAM_E, block=STREAM_BLOCK)
    keys = k.numel() * 4
    allowed = stream_allowance(q, k, v)
    sizes = dict(what=what, keys=keys // MiB, allowed=allowed // MiB)
    result = _measured_call(ctx, q, k, v, STREAM_BLOCK, what,
                            sent=(q, streams.marker(specs[0]), streams.marker(specs[1])))
    if result is None:
        raise Fail(_skipped(T("your function ran out of memory"), sizes), {"measured": True, "out_of_memory": True})
    peak = result.memory_peak
    if peak is None:
        return T("output right on {what}; memory not measured: this sandbox has no cgroup to read (the server "
                 "measures it: a softmax over whole rows of keys fails there)", what=what), {"measured": False}
    details = {"measured": True, "peak_mib": round(peak / MiB, 1), "allowed_mib": round(allowed / MiB, 1),
               "keys_mib": keys // MiB}
    if peak > allowed:
        raise Fail(_skipped(T("your run's memory grew by {value:.0f} MiB (measured by the grader from your run's "
                              "cgroup)", value=peak / MiB), sizes), details)
    return T("{what}: memory grew by {value:.0f} MiB (allowed {allowed} MiB; the keys alone are {keys} MiB): "
             "you stream over the keys", value=peak / MiB, **sizes), details


def _skipped(problem, sizes) -> T:
    return T("{what}: {problem}, over the {allowed} MiB allowed. The keys alone are {keys} MiB here, and the "
             "grader makes them only as your function takes them, block by block: you held every key at once "
             "(a softmax over whole rows of keys, for chunks of query rows or one row at a time) instead of "
             "streaming over the keys. Take the keys (and values) block by block, key[..., j:j + block_size, :], "
             "and keep a running maximum, normaliser and accumulator; until you do, the points of the online "
             "softmax, its stability and its memory score nothing", problem=problem, **sizes)
