"""Known wrong decoding steps of ``kv_cache_attention``, computed in the trusted parent to name a bug.

One step writes the new key and value at row ``position`` of the caches and attends the new query
over rows 0..position. Each wrong version here is that step with one slip seen in public decoding
code: attending before the new key is appended, a causal mask built for the whole sequence applied
again to the one query of the step, the write or the read shifted by one position, the preallocated
cache used whole (its padded rows never trimmed), or the scale taken from the number of cached keys.
Everything is float64.
"""
from __future__ import annotations

import math

import torch

from ...checks import variants
from ...i18n import N_

NAMES = ("output", "k_cache", "v_cache")
BUGS = {
    "attend_before_append": N_("you attend over the cache before appending the new key and value: the step's "
                               "own token is missing from what it attends to (off by one). Write key and value "
                               "at row position first, then attend over rows 0..position"),
    "causal_mask_on_step": N_("you apply a causal mask to the cached step: with one query, tril() keeps only the "
                              "first key. The cache holds only the past and the present, so a decoding step "
                              "needs no causal mask: attend over rows 0..position"),
    "position_off_by_one": N_("your position offset is off by one: the new key and value go to row position "
                              "(the number of tokens already cached), and the step attends over rows "
                              "0..position, position + 1 rows in all"),
    "cache_not_written": N_("you return the caches you were given: the new key and value must be written at row "
                            "position of the returned caches (copies), or the next step never sees this token"),
    "cache_not_trimmed": N_("you attend over the whole preallocated cache: its rows after position are padding "
                            "(stale values or zeros) and must get no weight; slice the cache to its first "
                            "position + 1 rows"),
    "scale_from_cache_length": N_("you scale by 1/√ of the number of cached keys: the scale is 1/√D, "
                                  "D = query.size(-1), whatever the cache holds"),
    "outputs_wrong_dtype": N_("your outputs are not in the inputs' dtype: return the output and both caches as "
                              "query.dtype (float32 inputs need float32 outputs, float64 inputs float64 ones)"),
}
# The family each is charged to (grader/causes.py).
HOMES = {
    "attend_before_append": ("cache",), "position_off_by_one": ("cache",), "causal_mask_on_step": ("output",),
    "cache_not_written": ("cache",),
    "cache_not_trimmed": ("padding",), "scale_from_cache_length": ("scale",),
    "outputs_wrong_dtype": ("dtype", "output"),
}
# The task's catalogue (Task.bugs): attention's, with the decoding step's own.
CATALOGUE = variants.ATTENTION.extend(BUGS, HOMES, by_check=("outputs_wrong_dtype",))  # dtype: seen, not computed
# Every key ``step`` knows ("bug:detail" where the student had a choice).
KEYS = ("attend_before_append", "causal_mask_on_step", "position_off_by_one:plus", "position_off_by_one:minus",
        "cache_not_trimmed", "cache_not_written", "scale_from_cache_length", "scale_dv", "no_scale",
        "softmax_queries")


def step(query, key, value, k_cache, v_cache, position: int, bug: str | None = None):
    """(output (B, 1, Dv), k_cache (B, N, D), v_cache (B, N, Dv)): the right step (bug None) or one
    wrong version (a key of ``KEYS``: this task's bugs, and attention's missing scale and softmax
    over the queries), in float64; None where that version cannot run (a write
    past the end of the cache)."""
    q, k, v, kc, vc = (t.double() for t in (query, key, value, k_cache, v_cache))
    N, D = kc.size(1), q.size(-1)
    write = position + {"position_off_by_one:plus": 1, "position_off_by_one:minus": -1}.get(bug, 0)
    if write >= N:
        return None
    before_k, before_v = kc, vc
    kc, vc = kc.clone(), vc.clone()
    kc[:, write], vc[:, write] = k[:, 0], v[:, 0]   # (B, D), (B, Dv): row ``write`` of each cache
    n = {"position_off_by_one:plus": position + 2, "position_off_by_one:minus": position,
         "cache_not_trimmed": N}.get(bug, position + 1)   # how many rows the step reads
    if bug == "attend_before_append":  # the caches as they came in: rows 0..position-1
        keys, vals = before_k[:, :position], before_v[:, :position]
    else:
        keys, vals = kc[:, :n], vc[:, :n]
    scale = {"scale_from_cache_length": 1 / math.sqrt(keys.size(1) or 1), "no_scale": 1.0,
             "scale_dv": 1 / math.sqrt(vc.size(-1))}.get(bug, 1 / math.sqrt(D))
    scores = q @ keys.transpose(-2, -1) * scale                      # (B, 1, n)
    if bug == "causal_mask_on_step":  # tril of a (1, n) mask: the one query sees key 0 only
        scores = scores.masked_fill(~torch.ones(1, scores.size(-1), dtype=torch.bool).tril(), float("-inf"))
    if scores.size(-1) == 0:  # nothing cached yet and the new key not appended: nothing to attend to
        return torch.zeros(*q.shape[:-1], v.size(-1), dtype=torch.float64), kc, vc
    # attention's own slip: the softmax over the queries (here a single one: every weight 1)
    out = torch.softmax(scores, dim=-2 if bug == "softmax_queries" else -1) @ vals
    if bug == "cache_not_written":  # attended with the token, then handed back the caches it was given
        return out, before_k, before_v
    return out, kc, vc



def diagnosis_reference(args, kwargs, scale=None) -> tuple | None:
    """The right (output, k_cache, v_cache) of one step: the task's ``Grading.reference``
    (grader/checks/diagnosis.py). Its scale is fixed by the width: none other."""
    return None if scale is not None else step(*args[:6])


def wrong_steps(query, key, value, k_cache, v_cache, position: int) -> dict:
    """{key: the step with that bug} on one call's inputs (only the versions that can run)."""
    out = {}
    for name in KEYS:
        got = step(query, key, value, k_cache, v_cache, position, name)
        if got is not None:
            out[name] = got
    return out


def decode(query, key, value, N: int, bug: str | None = None):
    """T steps from an empty (zero) cache of N rows, each fed the caches the last returned: the
    outputs (B, T, Dv) a decoder with this step produces, in float64 (None where it cannot run)."""
    B, T, D = query.shape
    kc = torch.zeros(B, N, D, dtype=torch.float64)
    vc = torch.zeros(B, N, value.size(-1), dtype=torch.float64)
    outs = []
    for t in range(T):
        got = step(query[:, t:t + 1], key[:, t:t + 1], value[:, t:t + 1], kc, vc, t, bug)
        if got is None:
            return None
        out, kc, vc = got
        outs.append(out)
    return torch.cat(outs, dim=1)


def wrong_outputs(args, kwargs) -> tuple:
    """(the right step, {key: the step with that bug}) on one call's arguments, in float64, for
    ``attn-grader tasks validate``."""
    return step(*args[:6]), wrong_steps(*args[:6])
