"""One scoring pass: the checks' verdicts in, points out.

The checks say only what holds (``CheckResult.passed``, its message and details, and the
``max_points`` its task gives it); none of them grants or takes a point. ``score`` is the one
place points are decided. It applies the task's rules in this order, each to what the previous
ones left, and records in ``Scored.rules`` which rule moved which check's points, and why:

1. ``grant``: a passed check earns its points (``task_points``: each family's total split over its
   checks by weight), a failed one none (not recorded: it is the verdict).
2. ``load``: a file that could not be loaded scores nothing, whatever passed before it failed.
3. ``detected``: built-in attention ran (or the grader was tampered with): no check but the
   ``load`` checks keeps its points.
4. ``unverified``: a post-run check (``Check.post``) could not verify that no built-in attention
   ran: nothing else is scored.
5. ``not_shown``: no output check shows the function computes attention: the families that a
   function which is not attention can pass (rows that sum to 1, batch independence, ...) score
   nothing. ``load``, ``forbidden`` and ``output`` are scored on their own.
6. ``knock_on`` and ``concept`` (grader/causes.py): one named bug is charged once, to its home
   family (and in every family of its concept, ``Task.concepts``, where it shows); a check of
   another concept that fails only because of it gets its points back. Rules 3-5 leave no bug
   to charge: they run only where none of them applied.
7. ``gate``: a check that gates families (``Check.gates``) and failed for no named bug leaves
   them nothing, knock-on refunds included.

Rules that take points add a note to the check's message ("not scored: ..."), so the report a
student reads says why; ``rules`` says it to a machine (the CLI's ``--json``, the web's result
page, ``attn-grader tasks validate``). The function is pure: it returns new check results and
leaves the verdicts it was given as they were.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

from .causes import charge_once
from .i18n import T

# Families scored on their own even where no output check shows attention (rule 5): loading,
# the forbidden scans, and the output checks themselves.
UNGATED = ("load", "forbidden", "output")


@dataclass(frozen=True)
class Facts:
    """What the run established about the file as a whole (grading.py works these out)."""
    loaded: bool = True
    detected: bool = False      # a forbidden check found built-in attention or tampering
    unverified: bool = False    # a post-run check did not pass
    shown: bool = True          # some output matched attention (or a named attention bug)
    post: frozenset = frozenset()  # the post-run checks' ids (never subject to rule 4)


@dataclass
class Scored:
    checks: list                 # new CheckResult objects, with their points
    causes: list = field(default_factory=list)  # grader/causes.py's root causes, charged once
    rules: list = field(default_factory=list)   # {"rule", "check", "points" (the change), ...why}

    def moved(self, rule: str, check, points: int, **why) -> None:
        if points or rule == "concept":  # a concept charge withholds a refund: 0 points, still said
            self.rules.append({"rule": rule, "check": check.id, "points": points, **why})


def split_points(total: int, weights: list[int]) -> list[int]:
    """Integers proportional to ``weights`` that sum to ``total`` (largest remainder)."""
    if not weights or not sum(weights):  # no weights, or only weight-0 checks (gates, reported only)
        return [0] * len(weights)
    raw = [total * w / sum(weights) for w in weights]
    pts = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - pts[i], reverse=True)[: total - sum(pts)]:
        pts[i] += 1
    return pts


def task_points(task) -> dict:
    """check id -> its points: each family's total split over its checks by their weights (the
    three load checks weigh 2, 2 and 1)."""
    ids = [("load.source", 2), ("load.import", 2), ("load.signature", 1)] + [(c.id, c.weight) for c in task.checks]
    out = {}
    for family, total in task.points.items():
        members = [(i, w) for i, w in ids if i.split(".")[0] == family]
        for (i, _), p in zip(members, split_points(total, [w for _, w in members])):
            out[i] = p
    return out


def score(verdicts: list, task, facts: Facts) -> Scored:
    """Points for ``verdicts`` (CheckResult objects, in report order) under ``task``'s rules."""
    out = Scored([dataclasses.replace(c, points=c.max_points if c.passed else 0, details=copy.copy(c.details))
                  for c in verdicts])
    if not facts.loaded:
        for c in out.checks:
            _take(out, "load", c)
        return out
    for c in out.checks:
        family = c.id.split(".")[0]
        if family == "load" or not c.points:
            continue
        if facts.detected and (family != "forbidden" or c.passed):
            _take(out, "detected", c, T(" (not scored: built-in attention was used or the grader was tampered with)"))
        elif facts.unverified and c.id not in facts.post:
            _take(out, "unverified", c, T(" (not scored: the run-time check could not verify that no built-in "
                                          "attention ran)"))
        elif not facts.shown and family not in UNGATED:
            _take(out, "not_shown", c, T(" (not scored: this property holds for functions that are not attention "
                                         "too, and none of your output checks shows attention)"))
    if not facts.detected and not facts.unverified and facts.shown:
        out.causes = charge_once(out.checks, task.points, task.bugs, task.concepts, moved=out.moved)
    _apply_gates(out, task)
    return out


def _take(out: Scored, rule: str, c, note=None, **why) -> None:
    """Rule ``rule`` takes ``c``'s points; ``note`` says so after its message."""
    if c.points:
        out.moved(rule, c, -c.points, **why)
        c.points = 0
        if note is not None:
            c.message += note


def _apply_gates(out: Scored, task) -> None:
    """Rule 7. A gate may have no points of its own (``weight=0``): its failure shows in the checks
    it gates."""
    verdicts = {c.id: c for c in out.checks}
    gates = {}
    for check in task.checks:
        if check.gates and check.id in verdicts and gate_closed(verdicts[check.id]):
            for family in check.gates:
                gates.setdefault(family, check.id)
    for c in out.checks:
        gate = gates.get(c.id.split(".")[0])
        if gate and c.id != gate and c.points:  # passed, or a knock-on given its points back
            _take(out, "gate", c, gate=gate)
            c.passed = False
            c.details.pop("because_of", None)
            c.details["gated_by"] = gate  # its own verdict held: the summary reads it after real failures
            c.message = T("not scored: these points rest on {check}, which did not pass ({message})", check=gate,
                          message=c.message)


def gate_closed(result) -> bool:
    """A gating check failed for no named bug (a named bug's failure is that bug's, charged once)."""
    return not result.passed and not result.details.get("diagnosis")
