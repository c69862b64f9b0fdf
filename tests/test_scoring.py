"""The one scoring pass (grader/scoring.py): verdicts in, points out, in the rules' written order."""
from __future__ import annotations

import copy

from grader.causes import summary
from grader.grading import CheckResult
from grader.scoring import Facts, score
from grader.tasks import TASKS

BACKWARD = TASKS["sdpa_backward"]
POINTS = {c.id: 4 for c in BACKWARD.checks}


def verdict(check_id, passed, diagnosis=None, **details):
    """A check's verdict as the run records it: no points yet."""
    return CheckResult(check_id, passed, 0, POINTS.get(check_id, 5), f"{check_id} message",
                       dict(details, **({"diagnosis": diagnosis} if diagnosis else {})))


def rules(scored):
    return [(r["rule"], r["check"], r["points"]) for r in scored.rules]


def test_the_verdicts_given_are_left_as_they_were():
    given = [verdict("load.source", True), verdict("output.dQ", False, "no_scale"),
             verdict("mask.bool", False, "no_scale")]
    before = copy.deepcopy(given)
    scored = score(given, BACKWARD, Facts())
    assert given == before and all(a is not b for a, b in zip(given, scored.checks))
    assert [c.points for c in given] == [0, 0, 0]


def test_a_passed_check_earns_its_points_and_a_failed_one_none():
    scored = score([verdict("load.source", True), verdict("output.dQ", True), verdict("mask.bool", False)],
                   BACKWARD, Facts())
    assert [c.points for c in scored.checks] == [5, 4, 0] and scored.rules == []


def test_a_file_that_did_not_load_scores_nothing():
    scored = score([verdict("load.source", True), verdict("load.import", False)], BACKWARD, Facts(loaded=False))
    assert [c.points for c in scored.checks] == [0, 0]
    assert rules(scored) == [("load", "load.source", -5)]


def test_a_detection_leaves_only_the_load_points_and_says_so():
    scored = score([verdict("load.source", True), verdict("forbidden.runtime", False, detected=True),
                    verdict("forbidden.static", True), verdict("output.dQ", True)],
                   BACKWARD, Facts(detected=True))
    assert [c.points for c in scored.checks] == [5, 0, 0, 0]
    assert rules(scored) == [("detected", "forbidden.static", -4), ("detected", "output.dQ", -4)]
    assert "not scored: built-in attention was used" in str(scored.checks[3].message)
    assert scored.causes == []  # nothing is charged to a bug in a file that is not graded


def test_rules_apply_in_their_written_order():
    """Not shown (rule 5) comes before the knock-on refund (rule 6): a property that functions other
    than attention also have is never refunded as a bug's knock-on."""
    given = [verdict("load.source", True), verdict("output.dQ", False),
             verdict("mask.bool", True), verdict("scale.default", True)]
    scored = score(given, BACKWARD, Facts(shown=False))
    assert [c.points for c in scored.checks] == [5, 0, 0, 0]
    assert [r[0] for r in rules(scored)] == ["not_shown", "not_shown"]


def test_a_gate_takes_back_what_it_gates():
    """grad.at_scale gates every family of sdpa_backward, loading included: a failure there for no
    named bug leaves them nothing (rule 7, after every other)."""
    given = [verdict("load.source", True), verdict("mask.bool", True), verdict("grad.at_scale", False)]
    scored = score(given, BACKWARD, Facts())
    assert [c.points for c in scored.checks] == [0, 0, 0] and not scored.checks[1].passed
    assert rules(scored) == [("gate", "load.source", -5), ("gate", "mask.bool", -4)]
    assert {r["gate"] for r in scored.rules} == {"grad.at_scale"}
    assert "not scored: these points rest on grad.at_scale" in str(scored.checks[1].message)
    # the summary names a real failure first, not a check the gate took
    assert scored.checks[1].details["gated_by"] == "grad.at_scale"
    assert "first grad.at_scale" in str(summary(scored.checks, scored.causes))
    # failed by a named bug, the gate is that bug's failure, charged once: the rest keep their points
    named = score([verdict("mask.bool", True), verdict("grad.at_scale", False, "no_scale")], BACKWARD, Facts())
    assert [c.points for c in named.checks] == [4, 0] and not any(r["rule"] == "gate" for r in named.rules)


def test_a_named_bug_is_charged_once_and_its_knock_ons_keep_their_points():
    task = TASKS["decoder_attention"]
    given = [CheckResult(i, False, 0, 4, "m", {"diagnosis": "masked_scores_zero"})
             for i in ("output.shapes", "padding.target", "causal.self", "cross.not_causal")]
    scored = score(given, task, Facts())
    assert [c.points for c in scored.checks] == [4, 0, 0, 4]
    assert rules(scored) == [("knock_on", "output.shapes", 4), ("concept", "causal.self", 0),
                             ("knock_on", "cross.not_causal", 4)]
    assert [c["diagnosis"] for c in scored.causes] == ["masked_scores_zero"]
