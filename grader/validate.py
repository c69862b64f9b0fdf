"""``attn-grader tasks validate PATH``: prove a task fair before it goes live.

A task folder (``grader/tasks/<id>/``, or a course's own with the same layout) is proved on its own
corpus and its own declarations, by grading as the server does:

1. ``corpus``: every correct file scores full marks under each of N seeds; every buggy file loses
   points, only in the family its header names (``# expect: <family>``), and a single-bug file
   names exactly one cause (the one its ``# cause: <name>`` header gives, where it has one);
2. ``bugs``: every bug the catalogue computes (``Grading.wrong_outputs``) shows on some scored case,
   and two bugs charged to different families can be told apart on the task's cases;
3. ``space``: every edge of the declared input space (``Task.input_space``) is drawn by a scored case
   of the correct files under every seed (each report's ``drawn``: grader/checks/input_space.py);
4. ``shortcuts``: the files in ``shortcuts/`` (``builtin.py``: torch's kernel swapped in;
   ``autograd.py``, where the task blocks autograd; ``skill.py``: the skill skipped) each lose at
   least half the points;
5. ``budget``: one grading costs at most ``Task.budget`` times the CPU of an ``sdpa`` grading
   measured in the same run.

Each finding says what failed and what to change; the command exits 1 when any fails.
"""
from __future__ import annotations

import glob
import importlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass, field

from .causes import concept_of
from .checks.bugs import key_name
from .tasks import Task, registry

SHOW_SAME = 1e-9  # relative difference below which a bug's output is the right one (or another bug's)


@dataclass
class Finding:
    proof: str          # corpus, bugs, space, shortcuts, budget
    ok: bool
    message: str
    warning: bool = False  # said, but does not fail the task


@dataclass
class Validation:
    task: str
    findings: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def add(self, proof, ok, message, warning=False):
        self.findings.append(Finding(proof, ok, message, warning))

    def to_dict(self) -> dict:
        return {"task": self.task, "ok": self.ok,
                "findings": [vars(f) for f in self.findings]}


def load_task(path: str) -> Task:
    """The Task of a folder (its ``__init__.py`` or ``task.py`` defines ``TASK``), or a registered id."""
    if not os.path.exists(path) and path in registry():
        return registry()[path]
    folder = os.path.abspath(path)
    if not os.path.isdir(folder):
        raise ValueError(f"{path}: no such task folder (nor a registered task id)")
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.dirname(folder) == os.path.join(here, "tasks"):  # one of the grader's own
        module = importlib.import_module(f"grader.tasks.{os.path.basename(folder)}")
    else:  # a course's folder: imported as a package from its parent directory
        parent, name = os.path.split(folder)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        module = importlib.import_module(name)
        if not isinstance(getattr(module, "TASK", None), Task) and os.path.exists(os.path.join(folder, "task.py")):
            module = importlib.import_module(f"{name}.task")
    task = getattr(module, "TASK", None)
    if not isinstance(task, Task):
        raise ValueError(f"{path}: its __init__.py (or task.py) defines no TASK = Task(...)")
    return task


def header(path: str, key: str) -> str | None:
    """``# key: value`` among a corpus file's first lines."""
    with open(path, encoding="utf-8") as f:
        for line in f.read(800).splitlines():
            if line.startswith(f"# {key}:"):
                return line.split(":", 1)[1].strip()
    return None


def _lost(report: dict) -> set:
    return {c["id"].split(".")[0] for c in report["checks"] if c["max_points"] and c["points"] < c["max_points"]}


class Recorder:
    """The calls of one grading, per check: (check id, args, kwargs), tensors copied."""

    def __init__(self):
        self.calls = []

    def __call__(self, check_id, args, kwargs):
        import torch
        copy = lambda x: x.detach().clone() if isinstance(x, torch.Tensor) else x  # noqa: E731
        self.calls.append((check_id, tuple(copy(a) for a in args), {k: copy(v) for k, v in kwargs.items()}))

    def scored(self, report: dict) -> list:
        points = {c["id"]: c["max_points"] for c in report["checks"]}
        return [(cid, a, kw) for cid, a, kw in self.calls if points.get(cid, 0) > 0]


def validate(task: Task, *, seeds: int = 5, sandbox: str = "auto", baseline: Task | None = None,
             say=lambda text: None) -> Validation:
    """Every proof of the module's docstring on ``task``; ``baseline`` is the task whose grading the
    budget is measured against (default: ``sdpa``, on its first correct corpus file)."""
    from .grading import grade_source

    result = Validation(task.id)

    def grade(path, seed, observe=None):
        with open(path, "rb") as f:
            return grade_source(f.read(), task, seed=seed, sandbox=sandbox, observe=observe).to_dict()

    correct = sorted(glob.glob(os.path.join(task.corpus, "correct", "*.py")))
    buggy = sorted(glob.glob(os.path.join(task.corpus, "buggy", "*.py")))
    if not correct:
        result.add("corpus", False, f"no correct files in {task.corpus}/correct/: add the reference solution "
                                    f"and other right ways of writing it")
        return result
    # 1. correct files under every seed; the first one's calls are the task's drawn cases
    cases_by_seed, drawn_by_seed = {}, {}
    for path in [p for p in correct if header(p, "expect")]:  # the suite reads the header, this the folder
        result.add("corpus", False, f"correct/{os.path.basename(path)} says '# expect: {header(path, 'expect')}': "
                   "a file with a bug belongs in buggy/")
    correct = [p for p in correct if not header(p, "expect")]
    for path in correct:
        scores = {}
        for seed in range(1, seeds + 1):
            say(f"grading correct/{os.path.basename(path)} with seed {seed}")
            recorder = Recorder() if path == correct[0] else None
            report = grade(path, seed, recorder)
            scores[seed] = report["score"]
            for axis, edges in (report.get("drawn") or {}).items():
                drawn_by_seed.setdefault(seed, {}).setdefault(axis, set()).update(edges)
            if recorder is not None:
                cases_by_seed[seed] = recorder.scored(report)
            if report["score"] != report["max_score"]:
                first = next((c for c in report["checks"] if c["max_points"] and not c["passed"]), None)
                result.add("corpus", False, f"correct/{os.path.basename(path)} scores {report['score']} under seed "
                           f"{seed}" + (f": {first['id']} fails: {first['message'][:200]}" if first else ""))
        if len(set(scores.values())) > 1:
            result.add("corpus", False, f"correct/{os.path.basename(path)} scores differ between seeds: {scores}: "
                       f"a verdict depends on the draw")
        elif set(scores.values()) == {100}:
            result.add("corpus", True, f"correct/{os.path.basename(path)}: 100 under seeds 1..{seeds}")
    for path in buggy:
        _buggy(result, task, path, grade(path, 1))
    cases = [case for seed_cases in cases_by_seed.values() for case in seed_cases]
    _bugs(result, task, cases)
    _space(result, task, drawn_by_seed, seeds)
    _shortcuts(result, task, grade)
    _budget(result, task, correct[0], sandbox, baseline or registry().get("sdpa"))
    return result


def _buggy(result, task, path, report):
    name = f"buggy/{os.path.basename(path)}"
    family, several, cause = header(path, "expect"), header(path, "bugs"), header(path, "cause")
    if not family:
        result.add("corpus", False, f"{name} has no '# expect: <family>' first line")
        return
    lost, causes = _lost(report), [c["diagnosis"] for c in report["causes"]]
    # One bug may cost its family, its concept's families, and the families a failed check of its
    # family gates (tiled_attention's key streaming carries the skill's: online, stability, memory).
    failed = {c["id"] for c in report["checks"] if not c["passed"]}
    allowed = concept_of(family, task.concepts) | {g for c in task.checks if c.id.split(".")[0] == family
                                                   and c.id in failed for g in c.gates}
    if family not in lost:
        result.add("corpus", False, f"{name} keeps its family {family}'s points (lost: {sorted(lost) or 'nothing'}): "
                   f"no check of {family} catches it")
    elif family != "forbidden" and not several and not lost <= allowed:
        result.add("corpus", False, f"{name} also loses {sorted(lost - allowed)}: one bug must cost only {family} "
                   f"(or its concept's families, or those its failed checks gate) (report: {report['summary'][:200]})")
    elif family != "forbidden" and not several and cause and causes != [cause]:
        result.add("corpus", False, f"{name} names {causes or 'no cause'} instead of exactly {cause!r}")
    elif family != "forbidden" and not several and len(causes) > 1:
        result.add("corpus", False, f"{name} names {len(causes)} causes for one bug: {causes}")
    else:
        named = f", named {causes[0]}" if causes else ""
        kept = ", ".join(sorted(lost))
        result.add("corpus", True, f"{name}: built-in attention found, scores {report['score']}"
                   if family == "forbidden" else f"{name}: loses {kept} only{named}" if not several else
                   f"{name}: loses {family} (several bugs: {several})",
                   warning=not causes and family != "forbidden" and not several)
        if not causes and family != "forbidden" and not several:
            result.findings[-1].message += " (no cause named: add the bug to the catalogue to name it)"


def _signature(out, right):
    """An output's values, rounded relative to the right output's magnitude (NaN kept as a mark)."""
    import torch
    flat = lambda o: torch.cat([t.double().reshape(-1) for t in (o if isinstance(o, tuple) else (o,))])  # noqa: E731
    got, ref = flat(out), flat(right)
    finite = ref[torch.isfinite(ref)]
    scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
    return got / scale, ref / scale


def _differs(a, b) -> bool:
    import torch
    if a.shape != b.shape:
        return True
    nan_a, nan_b = a.isnan(), b.isnan()
    if bool((nan_a != nan_b).any()):
        return True
    both = ~nan_a
    return bool(((a[both] - b[both]).abs() > SHOW_SAME).any()) if both.any() else False


def _bugs(result, task, cases):
    produce = task._built().wrong_outputs
    bugs = task.bugs
    if produce is None:
        result.add("bugs", False, "the task's build() gives no wrong_outputs(args, kwargs): the catalogue's bugs "
                                  "cannot be shown reachable")
        return
    shown: dict[str, int] = {}        # bug name -> cases where it differs from the right output
    outputs: dict[str, list] = {}     # bug name -> [(case index, normalised output)]
    for i, (check_id, args, kwargs) in enumerate(cases):
        try:
            right, wrong = produce(args, kwargs)
        except Exception:  # noqa: BLE001  a case the catalogue does not model (a gradient call, say)
            continue
        for key, out in wrong.items():
            if out is None:
                continue
            try:
                got, ref = _signature(out, right)
            except Exception:  # noqa: BLE001  another shape: it shows, and cannot be confused
                shown[key_name(key)] = shown.get(key_name(key), 0) + 1
                continue
            name = key_name(key)
            shown.setdefault(name, 0)
            if _differs(got, ref):
                shown[name] += 1
                outputs.setdefault(name, []).append((i, got))
    families = task.points
    unreachable = sorted(n for n, count in shown.items() if not count)
    missing = sorted(set(bugs.own) - set(shown) - set(bugs.by_check))
    for name in unreachable:
        result.add("bugs", False, f"bug {name!r}: no scored case shows it (its output equals the right one on "
                                  f"every drawn case): draw a case where it changes the output")
    for name in missing:
        result.add("bugs", False, f"bug {name!r} is in the catalogue but wrong_outputs never computes it: "
                                  f"compute it, or declare it recognised by a check (Catalogue by_check)")
    reachable = sorted(n for n, count in shown.items() if count)
    if reachable:
        result.add("bugs", True, f"{len(reachable)} bugs each show on some scored case")
    # told apart: two bugs whose outputs agree on every case where both show
    same_pairs = []
    names = [n for n in reachable if n in outputs]
    for i, a in enumerate(names):
        by_case_a = dict((c, o) for c, o in outputs[a])
        for b in names[i + 1:]:
            common = [(by_case_a[c], o) for c, o in outputs[b] if c in by_case_a]
            if common and len(common) == len(outputs[a]) == len(outputs[b]) and \
                    not any(_differs(x, y) for x, y in common):
                same_pairs.append((a, b))
    for a, b in same_pairs:
        home_a, home_b = bugs.home_family(a, families), bugs.home_family(b, families)
        if home_a != home_b:
            result.add("bugs", False, f"bugs {a!r} ({home_a}) and {b!r} ({home_b}) give the same output on every "
                                      f"case: draw a case that tells them apart, or charge them to one family")
        else:
            result.add("bugs", True, f"bugs {a!r} and {b!r} give the same output on every case; both are charged "
                                     f"to {home_a}, and the report names the first", warning=True)
    if not any(home_a != home_b for a, b in same_pairs
               for home_a, home_b in [(bugs.home_family(a, families), bugs.home_family(b, families))]):
        result.add("bugs", True, "bugs charged to different families can be told apart on the task's cases")


def _space(result, task, drawn_by_seed, seeds):
    if not task.input_space:
        result.add("space", False, "the task declares no input space (Task.input_space: axis -> its edges, and "
                                   "Grading.describe: the edges one call stands on)")
        return
    for axis, edges in task.input_space.items():
        for edge in edges:
            missed = [seed for seed in range(1, seeds + 1) if edge not in drawn_by_seed.get(seed, {}).get(axis, ())]
            if missed:
                result.add("space", False, f"edge {axis} = {edge}: no scored case draws it under seed(s) "
                                           f"{missed}: add a case (or a fixed part of one) that does")
            else:
                result.add("space", True, f"edge {axis} = {edge}: drawn under every seed")


def _shortcuts(result, task, grade):
    folder = os.path.join(task.folder, "shortcuts")
    wanted = {"builtin": "torch's built-in kernel swapped into the reference solution"}
    if "autograd" in task.block:
        wanted["autograd"] = "the reference solution with autograd, which the task forbids"
    if task.skill:
        wanted["skill"] = f"the skill skipped ({task.skill})"
    for name, what in wanted.items():
        path = os.path.join(folder, f"{name}.py")
        if not os.path.exists(path):
            result.add("shortcuts", False, f"shortcuts/{name}.py is missing: write {what}")
            continue
        report = grade(path, 1)
        if report["score"] * 2 > report["max_score"]:
            result.add("shortcuts", False, f"shortcuts/{name}.py ({what}) keeps {report['score']} of "
                                           f"{report['max_score']}: a shortcut must lose at least half the points")
        else:
            result.add("shortcuts", True, f"shortcuts/{name}.py ({what}): {report['score']}/{report['max_score']}")


def _cpu_of(task, path, sandbox, runs: int = 2) -> float:
    """The parent's CPU during one grading plus the child's charged time: the least of ``runs``
    gradings (the first may pay for imports and warm-up the other task's grading already paid)."""
    from .grading import grade_source
    with open(path, "rb") as f:
        source = f.read()
    spent = []
    for _ in range(runs):
        began = time.process_time()
        report = grade_source(source, task, seed=1, sandbox=sandbox)
        spent.append(time.process_time() - began + report.timings.get("student_s", 0.0))
    return min(spent)


def _budget(result, task, path, sandbox, baseline):
    reference = sorted(glob.glob(os.path.join(baseline.corpus, "correct", "*.py")))[:1] if baseline else []
    if not reference:
        result.add("budget", True, "no baseline corpus to compare with: budget not measured", warning=True)
        return
    base = _cpu_of(baseline, reference[0], sandbox)
    mine = base if task is baseline else _cpu_of(task, path, sandbox)
    ratio = mine / base if base else 0.0
    ok = ratio <= task.budget
    result.add("budget", ok, f"one grading costs {mine:.2f} s of CPU, {ratio:.2f}× {baseline.id}'s {base:.2f} s in "
                             f"this run (budget {task.budget}×)" + ("" if ok else ": make the cases smaller or fewer"))
