"""Naming bugs no catalogue entry matches, by what differs and where (issue 40, item 3):
grader/checks/diagnosis.py, kind by kind, on answers computed here (no grading, no child)."""
import math

import torch

from grader.checks import diagnosis
from grader.checks.variants import attend
from reference_impl import scaled_dot_product_attention


def _qkv(*batch, L=6, S=7, E=5, Ev=9, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*batch, n, d, generator=g, dtype=dtype) for n, d in ((L, E), (S, E), (S, Ev)))


def test_a_division_by_the_batch_size_is_named_with_its_size():
    from grader.tasks.sdpa_backward.checks import reference_grads
    q, k, v = _qkv(3, 2)
    g = torch.randn(3, 2, 6, 9, dtype=torch.float64)
    dq, dk, dv = reference_grads(q, k, v, g)
    kind, text = diagnosis.constant_ratio("sdpa_backward", (q, k, v, g), (dq / 3, dk / 3, dv),
                                          (dq, dk, dv))
    assert kind == "constant_ratio" and "dQ, dK" in text and "÷ the batch dimension 0 (3)" in text


def test_a_ratio_that_differs_between_outputs_is_not_one_cause():
    from grader.tasks.sdpa_backward.checks import reference_grads
    q, k, v = _qkv(3, 2)
    g = torch.randn(3, 2, 6, 9, dtype=torch.float64)
    dq, dk, dv = reference_grads(q, k, v, g)
    assert diagnosis.constant_ratio("sdpa_backward", (q, k, v, g), (dq / 3, dk / 2, dv), (dq, dk, dv)) is None
    noisy = dq / 3 + 1e-2 * torch.randn_like(dq)
    assert diagnosis.constant_ratio("sdpa_backward", (q, k, v, g), (noisy, dk, dv), (dq, dk, dv)) is None


def test_the_effective_scale_is_read_from_the_outputs():
    q, k, v = _qkv(2, L=6, S=7, E=5, Ev=9)
    out = scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(9))  # √Ev instead of √E
    kind, text = diagnosis.effective_scale("tiled_attention", (q, k, v, 4), {}, (out,))
    assert kind == "effective_scale" and "1/√Ev (9)" in text and "1/√5" in text


def test_two_catalogue_bugs_at_once_are_both_named():
    q, k, v = _qkv(2)
    mask = torch.rand(6, 7, generator=torch.Generator().manual_seed(1)) < 0.6
    mask[:, 0] = True
    out = attend(q, k, v, 1 / 5, keep=~mask)  # 1/d_k and the mask's polarity inverted
    kind, text = diagnosis.two_bugs("sdpa", (q, k, v), {"attn_mask": mask}, (out,))
    assert kind == "scale_dk+mask_polarity"
    assert "instead of √d_k" in text and "wrong polarity" in text


def test_where_the_values_differ_names_the_last_query_tile():
    q, k, v = _qkv(2, L=41, S=20)
    ref = scaled_dot_product_attention(q, k, v)
    out = ref.clone()
    out[..., 32:, :] = 0  # a last tile of 9 queries never computed
    kind, text = diagnosis.where_wrong("tiled_attention", (q, k, v, 8), {}, (out,), (ref,))
    assert kind == "last_rows_wrong" and "positions 32 to 40" in text


def test_where_the_values_differ_names_padded_rows_and_the_causal_alignment():
    from grader.tasks.decoder_attention.checks import reference
    g = torch.Generator().manual_seed(2)
    t, m = torch.randn(3, 6, 5, generator=g, dtype=torch.float64), torch.randn(3, 4, 5, generator=g, dtype=torch.float64)
    t_len, m_len = torch.tensor([6, 3, 2]), torch.tensor([4, 4, 1])
    self_out, cross_out = reference(t, m, t_len, m_len)
    leaked = self_out.clone()
    leaked[1, 3:] = 1.0  # padded rows of sequence 1 not zeroed
    kind, _ = diagnosis.where_wrong("decoder_attention", (t, m, t_len, m_len), {}, (leaked, cross_out),
                                    (self_out, cross_out))
    assert kind == "padded_rows_wrong"
    # causal: rows that have future keys to hide are wrong, the last row (which sees every key) right
    q, k, v = _qkv(2, L=5, S=5)
    unmasked = attend(q, k, v, 1 / math.sqrt(5))
    ref = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert diagnosis.where_wrong("sdpa", (q, k, v), {"is_causal": True}, (unmasked,), (ref,))[0] == \
        "future_rows_wrong"
    # one batch element overwritten by another
    q, k, v = _qkv(3, L=5, S=6)
    ref = scaled_dot_product_attention(q, k, v)
    mixed = ref.clone()
    mixed[2] = ref[0]
    kind, text = diagnosis.where_wrong("sdpa", (q, k, v), {}, (mixed,), (ref,))
    assert kind == "some_batches_wrong" and "[[2]]" in text


def test_a_crash_is_traced_to_the_input_property_that_triggers_it():
    calls = [("output.shapes", {"dtype": ["float32"], "dims": ["4-D"]}, None),
             ("output.float64", {"dtype": ["float64"], "dims": ["4-D"]}, ("RuntimeError", "expected scalar type Float")),
             ("dtype.float64", {"dtype": ["float64"], "dims": ["3-D"]}, ("RuntimeError", "expected scalar type Float")),
             ("mask.bool", {"dtype": ["float32"], "dims": ["3-D"]}, None)]
    kind, text = diagnosis.crash_property(calls, "output.float64")
    assert kind == "crash_on:dtype=float64" and "RuntimeError" in text and "dtype = float64" in text
    # a property the answered calls had too is no explanation
    assert diagnosis.crash_property(calls[:1] + [("x.y", {"dtype": ["float32"]}, ("ValueError", "no"))],
                                    "x.y") is None
    # a function that raises on every input (autograd switched off, say) has no trigger to name
    raising = [(cid, props, ("AutogradDisabled", "off")) for cid, props, _ in calls]
    assert diagnosis.crash_property(raising, "output.float64") is None


# ---- whole gradings: the unnamed kinds now name their cause ----------------------------
# The correct backward the next two files each break in one line.
BACKWARD = '''
import torch
def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False, scale=None):
    s = query.size(-1) ** -0.5 if scale is None else scale
    scores = query @ key.transpose(-2, -1) * s
    L, S = scores.shape[-2:]
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    elif attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    p = torch.softmax(scores, -1)
    dp = grad_out @ value.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ key * s, ds.transpose(-2, -1) @ query * s, p.transpose(-2, -1) @ grad_out
'''
RIGHT_DS = "ds = p * (dp - (dp * p).sum(-1, keepdim=True))"
BATCH_MEAN_BACKWARD = BACKWARD.replace(RIGHT_DS, RIGHT_DS + " / query.size(0)   # \"mean over the batch\"")
assert BATCH_MEAN_BACKWARD != BACKWARD

TWO_BUGS_SDPA = '''
import torch
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scores = query @ key.transpose(-2, -1) / query.size(-1)               # 1/d_k
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(attn_mask, float("-inf"))             # True = hide (inverted)
    elif attn_mask is not None:
        scores = scores + attn_mask
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if scale is not None:
        scores = scores * scale * query.size(-1)
    return torch.softmax(scores, -1) @ value
'''


def _grade(source, task):
    from grader.grading import grade_source
    return grade_source(source, task, seed=3, sandbox="auto").to_dict()


def test_a_division_by_the_batch_size_is_named_in_the_report():
    report = _grade(BATCH_MEAN_BACKWARD, "sdpa_backward")
    assert [c["diagnosis"] for c in report["causes"]] == ["constant_ratio"]
    assert "dQ, dK" in report["summary"] and "batch dimension 0" in report["summary"]


def test_two_catalogue_bugs_at_once_are_named_not_zeroed():
    report = _grade(TWO_BUGS_SDPA, "sdpa")
    named = {c["diagnosis"] for c in report["causes"]}
    assert "scale_dk" in named and "scale_dk+mask_polarity" in named
    assert report["score"] > 50


FLOAT64_CRASH_BACKWARD = BACKWARD.replace(  # float32 ones: raises on float64 inputs
    RIGHT_DS, "ds = p * (dp - (dp * p) @ torch.ones(S, 1))")
assert FLOAT64_CRASH_BACKWARD != BACKWARD


def test_a_float64_crash_is_named_and_the_cost_check_still_sees_a_backward():
    """grad.at_scale grades cost, not dtypes: a backward that raises on float64 only is timed in
    float32 there, so its crash is charged where calls raised, not in every family it gates."""
    report = _grade(FLOAT64_CRASH_BACKWARD, "sdpa_backward")
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["grad.at_scale"]["passed"], checks["grad.at_scale"]["message"]
    assert checks["dtype.float32"]["passed"] and not checks["dtype.float64"]["passed"]
    assert [c["diagnosis"] for c in report["causes"]] == ["crash_on:dtype=float64"]
    assert report["score"] > 5


def test_a_crash_names_the_trigger_every_raising_call_shares():
    """A check whose one raising call had batch = 1 and float64 names float64, the property every
    call that raised in the grading had, not the one that sorts first."""
    calls = [("output.step", {"dtype": ["float32"], "batch": ["more than 1"]}, None),
             ("output.float64", {"dtype": ["float64"], "batch": ["more than 1"]}, ("RuntimeError", "Float != Double")),
             ("steps.decode", {"dtype": ["float64"], "batch": ["1"]}, ("RuntimeError", "Float != Double"))]
    assert diagnosis.crash_property(calls, "steps.decode")[0] == "crash_on:dtype=float64"
