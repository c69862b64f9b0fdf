"""Grade one submission: load it in a sandboxed child, run the task's checks, score them.

The checks give verdicts; points are decided once, afterwards, by ``grader/scoring.py``.

``grade_source`` is the one entry point (CLI, web service and tests all use it). The
parent generates every input from a seeded generator (a secret per-run seed on the
server, a public one for the local pre-check), computes the references and every
verdict itself, and only asks the child to run the student's function.
"""
from __future__ import annotations

import dataclasses
import json
import secrets
import time
from dataclasses import dataclass, field

from . import GRADER_VERSION, bounded
from .checks.base import Context, Fail, StudentFailure, clean_traceback
from .source import foreign_coding, parse_failure, submission_text
from .causes import summary
from .jsonsafe import json_safe
from .checks.fingerprint import fresh_samples, kernel_output
from .checks.diagnosis import name_the_rest
from .checks.input_space import drawn_edges
from .i18n import N_, T, counted, entry
from .sandbox import SandboxSession
from .scoring import Facts, gate_closed, score, task_points
from .tasks import Task, registry

CHECK_SECONDS = 8.0   # per-check budget of the student's own time (no waits for a core); one slow check fails alone
DETAILS_LIMIT = 20_000  # bytes of JSON per check's details
CRASH_LIMIT = 6       # crashes/timeouts after which the remaining checks are not run (each costs a new child)


@dataclass
class CheckResult:
    """One check's verdict; ``points`` stays 0 until ``scoring.score`` decides it."""
    id: str
    passed: bool
    points: int
    max_points: int
    message: str
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        details = json_safe(self.details)
        if len(json.dumps(details)) > DETAILS_LIMIT:  # heatmaps go first, then the rest is cut
            details = {k: v for k, v in details.items() if not k.startswith("weights_")}
            if len(json.dumps(details)) > DETAILS_LIMIT:
                details = {"truncated": json.dumps(details)[: DETAILS_LIMIT // 2]}
        # ``message`` stays English (the API's users read it); ``message_i18n`` lets a page show
        # it in its reader's language (grader/i18n.py), for a message that has a template.
        out = {"id": self.id, "passed": self.passed, "points": self.points, "max_points": self.max_points,
               "message": str(self.message), "details": details}
        if isinstance(self.message, T):
            out["message_i18n"] = entry(self.message)
        return out


@dataclass
class GradeReport:
    task: str
    checks: list
    error: str | None = None
    sandbox: str = ""
    warnings: list = field(default_factory=list)
    seed_public: int | None = None
    timings: dict = field(default_factory=dict)
    student_stdout: str = ""
    student_stderr: str = ""
    causes: list = field(default_factory=list)   # root causes, each charged once (grader/causes.py)
    drawn: dict = field(default_factory=dict)    # axis -> declared edges a scored case met (checks/input_space.py)
    # Which scoring rule moved which check's points, in the order applied: {"rule", "check", "points"
    # (the change), ...}: load, detected, unverified, not_shown, knock_on, concept, gate (grader/scoring.py).
    rules: list = field(default_factory=list)

    @property
    def score(self) -> int:
        return sum(c.points for c in self.checks)

    @property
    def max_score(self) -> int:
        return sum(c.max_points for c in self.checks)

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.passed for c in self.checks if c.max_points > 0)

    def to_dict(self) -> dict:
        said = summary(self.checks, self.causes)
        return {"task": self.task, "score": self.score, "max_score": self.max_score, "passed": self.passed,
                "checks": [c.to_dict() for c in self.checks], "error": self.error,
                "grader_version": GRADER_VERSION, "torch_version": _torch_version(),
                "sandbox": self.sandbox, "warnings": list(self.warnings),
                "seed_public": self.seed_public, "timings": self.timings,
                "causes": list(self.causes), "rules": list(self.rules), "summary": str(said), "drawn": dict(self.drawn),
                "student_stdout": self.student_stdout, "student_stderr": self.student_stderr,
                **({"summary_i18n": entry(said)} if isinstance(said, T) else {}),
                **({"error_i18n": entry(self.error)} if isinstance(self.error, T) else {})}


def _torch_version() -> str:
    """The torch this report was graded with (a student's pre-check compares its own with it)."""
    import torch
    return torch.__version__


def _signature_problem(task, params) -> str | None:
    if params is None:
        return None
    positional = [p for p in params if p["kind"] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    var_pos = any(p["kind"] == "VAR_POSITIONAL" for p in params)
    var_kw = any(p["kind"] == "VAR_KEYWORD" for p in params)
    if len(positional) < task.positional and not var_pos:
        return counted(len(positional), N_("your function takes {got} positional argument but the task passes {want}"),
                       N_("your function takes {got} positional arguments but the task passes {want}"),
                       got=len(positional), want=task.positional)
    extra = positional[task.positional:] + [p for p in params if p["kind"] == "KEYWORD_ONLY"]
    names = {p["name"] for p in extra if p["kind"] != "POSITIONAL_ONLY"}
    missing = [k for k in task.keywords if k not in names and not var_kw]
    if missing:
        return T("your function has no parameter named {names} (the task passes it by keyword)",
                 names=", ".join(missing))
    required = [p["name"] for p in extra if not p["has_default"] and p["name"] not in task.keywords]
    if required:
        return counted(len(required), N_("parameter {names} needs a default value: the grader never passes it"),
                       N_("parameters {names} need a default value: the grader never passes them"),
                       names=", ".join(required))
    return None


def progress_steps(task: Task) -> int:
    """How many steps grading ``task`` reports to ``progress``: loading (source, import, signature),
    then each check. The pre-check's bar knows it before its first frame."""
    return 3 + len(task.checks)


def grade_source(source, task: str, *, seed: int | None = None, sandbox: str = "auto", device: str = "cpu",
                 limits=None, progress=None, only: str | None = None,
                 server_seed: int | None = None, observe=None) -> GradeReport:
    """Grade ``source`` (the text or bytes of one .py file) for ``task`` (a registered task id).

    ``seed=None`` draws a secret seed (the server); a given seed is public and is echoed in the
    report as ``seed_public``. ``progress(check_id, done, total)`` is called before each check.
    Raises ``SandboxUnavailable`` for ``sandbox="strict"`` where isolation is missing, and
    ``ValueError`` for an unknown task or sandbox level. ``task`` may also be a ``Task`` that is not
    registered (``attn-grader tasks validate`` proves one before it goes live); ``observe(check_id,
    args, kwargs)`` is told every call a check makes (the validation's record of the drawn cases).
    """
    if isinstance(task, Task):
        t = full = task
        task = t.id
    else:
        tasks = registry()
        if task not in tasks:
            raise ValueError(f"unknown task {task!r}; choose one of {', '.join(tasks)}")
        t = full = tasks[task]
    if only is not None:
        if only not in {c.id for c in t.checks}:
            raise ValueError(f"unknown check {only!r} for task {task}; choose one of "
                             f"{', '.join(c.id for c in t.checks)}")
        t = dataclasses.replace(t, _grading=dataclasses.replace(t._built(), checks=_with_needs(t.checks, only)))
    started = time.monotonic()
    report = GradeReport(task=task, checks=[], seed_public=seed, timings={"student_s": 0.0})
    max_points = task_points(full)  # the whole task's split, also with only=
    # The server passes server_seed (derived from its secret and the submission's content: the same
    # code always meets the same inputs, which no student can compute); it is never echoed.
    secret = server_seed if server_seed is not None else (seed if seed is not None else secrets.randbits(62))
    total = progress_steps(t)

    def add(check_id, passed, message, details=None):  # a verdict: its points are scoring.score's
        report.checks.append(CheckResult(check_id, passed, 0, max_points.get(check_id, 0), message, details or {}))

    def fail_load(check_id, message, details=None):
        add(check_id, False, message, details)
        report.error = message
        done = {c.id for c in report.checks}
        for cid in ["load.source", "load.import", "load.signature"] + [c.id for c in t.checks]:
            if cid not in done:
                add(cid, False, T("skipped: the submission could not be loaded"), {"skipped": True})
        _score(report, t, Facts(loaded=False))
        report.timings["total_s"] = round(time.monotonic() - started, 3)
        return report

    if progress:
        progress("load.source", 0, total)
    try:
        source = submission_text(source)  # the one text the parent scans and the child runs
    except UnicodeDecodeError as exc:
        return fail_load("load.source", T("the file is not valid UTF-8 text (byte {byte} cannot be "
                                          "decoded): save it as UTF-8", byte=exc.start))
    except UnicodeEncodeError as exc:  # text handed over as str with a lone surrogate
        return fail_load("load.source", T("the file is not valid Unicode text (character {position} is half "
                                          "of a surrogate pair): save it as UTF-8", position=exc.start))
    try:  # the parse and the source scans the checks read, in one limited process (bounded.py)
        analysis = bounded.analyse(source, [SCAN_OF_CHECK[c.id] for c in t.checks if c.id in SCAN_OF_CHECK])
    except bounded.BoundExceeded as exc:
        return fail_load("load.source", T("the grader could not parse your file within its limits ({detail}): "
                                          "a solution needs far less; remove generated or pasted code",
                                          detail=exc.detail or exc.what), {"bound": exc.what})
    if analysis.problem:
        return fail_load("load.source", *parse_failure(analysis.problem))
    add("load.source", True, T("valid UTF-8 Python"))
    coding = foreign_coding(source)

    with SandboxSession(source, t.function, level=sandbox, limits=limits, device=device, block=t.block) as session:
        report.sandbox, report.warnings = session.level, list(session.warnings)
        if coding:
            report.warnings.append(T("your file declares the encoding {encoding} in a coding line; the grader "
                                     "reads every file as UTF-8 and ignores that line", encoding=coding))
        if progress:
            progress("load.import", 1, total)
        loaded = session.load()
        report.timings["load_s"] = round(time.monotonic() - started, 3)
        if not loaded.ok:
            err = loaded.error
            if err.kind == "missing":
                msg = T("your file does not define {function}(): {message}", function=t.function,
                        message=err.message)
            elif err.kind == "timeout":
                msg = T("importing your file took too long ({message}): move slow work out of module level",
                        message=err.message)
            else:
                error = (err.exc_type + ": " if err.exc_type else "") + err.message
                msg = T("importing your file failed: {error}", error=error)
            return _finish(report, session, fail_load("load.import", msg, {"traceback": clean_traceback(err.traceback)}))
        add("load.import", True, T("the file imports and defines {function}()", function=t.function))
        problem = _signature_problem(t, loaded.params)
        if problem:
            return _finish(report, session, fail_load("load.signature", problem, {"parameters": loaded.params}))
        add("load.signature", True, T("the signature accepts every argument the task passes"))
        facts = _run_checks(report, session, t, secret, device, add, progress, total, smallest=only is not None,
                            observe=observe, analysis=analysis)
        if only is not None and all(c.passed for c in report.checks if c.id == only):
            # the smallest case passes: show the check at its ordinary sizes instead
            report.checks = [c for c in report.checks if c.id.startswith("load.")]
            facts = _run_checks(report, session, t, secret, device, add, progress, total, analysis=analysis)
        if t.gpu_suite and str(device).startswith("cuda"):
            add_gpu_suite(report, session, device, secret)
        _score(report, t, facts)
        _finish(report, session, report)
    report.timings["total_s"] = round(time.monotonic() - started, 3)
    return report


def add_gpu_suite(report, session, device, seed, dtypes=None) -> None:
    """On a GPU, add the float16/bfloat16 checks and the timing, reported with 0 points.

    They are never part of the score: max_score stays 100 on every device, so the same
    file scores the same on a CPU and a GPU host. Skipped when built-in attention was found.
    """
    from .checks.gpu_suite import run_gpu_suite

    if any(c.id.startswith("forbidden.") and c.details.get("detected") for c in report.checks):
        return
    kwargs = {"dtypes": dtypes} if dtypes is not None else {}
    started = time.monotonic()
    for c in run_gpu_suite(session, device, seed=seed, points=0.0, **kwargs):
        report.checks.append(CheckResult(c["id"], c["passed"], 0, 0, c["message"], c["details"]))
    report.timings["gpu_suite_s"] = round(time.monotonic() - started, 3)


def _clip(text: str, limit: int = 4000) -> str:
    """The start of what the student printed and its last lines (where the sandbox's note on how
    much was dropped sits)."""
    if len(text) <= limit:
        return text
    return text[: limit - 600] + f"\n[… {len(text) - limit + 100:,} characters not shown …]\n" + text[-500:]


def _score(report, t, facts) -> None:
    """The one scoring pass (grader/scoring.py) over the verdicts the run recorded."""
    scored = score(report.checks, t, facts)
    report.checks, report.causes, report.rules = scored.checks, scored.causes, scored.rules
    for c in report.checks:
        if not c.passed and c.max_points and not c.details.get("skipped") and not c.id.startswith("load."):
            c.details["reproduce"] = f"attn-grader check FILE --task {t.id} --only {c.id}"


def _finish(report, session, result):
    report.student_stdout, report.student_stderr = _clip(session.stdout), _clip(session.stderr)
    # What the limits charged: the child's time, less its waits for a busy core (sandbox/waiting.py).
    report.timings["student_s"] = round(session.charged, 3)
    return result


# The checks that read the source without running it (what they find the run must confirm), and
# the scan each reads (bounded.SCANS, run once per grading with the parse).
SCAN_OF_CHECK = {"forbidden.static": "forbidden", "forbidden.autograd_source": "autograd"}
STATIC_SCANS = tuple(SCAN_OF_CHECK)


def _run_one(ctx, check, add, per_check) -> bool | None:
    """Run one check and record it; True/False its verdict, None when it crashed or hung."""
    ctx.start(check.id)
    began = time.monotonic()
    passed, details, crashed = False, {}, False
    try:
        result = check.fn(ctx)
        message, details = (result if isinstance(result, tuple) else (result or T("passed"), {}))
        passed = True
    except Fail as f:
        message, details = f.message, f.details
    except StudentFailure as s:
        crashed = s.unanswered
        message = s.describe()
        details = {"error_kind": s.error.kind, "traceback": clean_traceback(s.error.traceback)[-3000:]}
        if "in-place operation" in s.error.message and check.family == "grad" and ctx.mutated:
            # autograd refusing an in-place change the parent saw itself (the message alone is not evidence)
            details["diagnosis"] = "inputs_modified"
    except Exception as exc:  # a grader bug must not take the other checks down
        details = {"internal_error": f"{type(exc).__name__}: {exc}"[:500]}
        if check.family == "forbidden":
            # A file a forbidden check cannot finish on is not thereby clean: it counts as a detection
            # (for a source scan alone, one the run must confirm: _unconfirmed_static).
            message = T("the grader could not finish checking your file for built-in attention ({error}): "
                        "simplify the code it stopped on", error=type(exc).__name__)
            details["detected"] = True
        else:
            message = T("the grader could not run this check ({error}); please report it", error=type(exc).__name__)
    per_check[check.id] = round(time.monotonic() - began, 3)
    if passed:
        ctx.passed.add(check.id)
    add(check.id, passed, message, details)
    return None if crashed else passed


def _attention_shown(report, ctx) -> bool:
    """Some call matched the reference (or a named attention bug), or an output check passed."""
    if ctx.attention_seen:
        return True
    for c in report.checks:
        if c.id.split(".")[0] == "output" and (c.passed or c.details.get("diagnosis")):
            return True
    return False


def _with_needs(checks: list, only: str) -> list:
    """The source scan, ``only`` and what it needs (transitively), in the task's order."""
    by_id = {c.id: c for c in checks}
    keep, todo = {"forbidden.static"}, [only]
    while todo:
        cid = todo.pop()
        if cid not in keep:
            keep.add(cid)
            todo.extend(getattr(by_id[cid], "needs", ()))
    return [c for c in checks if c.id in keep]


def _unconfirmed_static(report) -> None:
    """A static finding the run contradicts costs its own check's points, nothing more.

    Built-in attention (and, where a task blocks it, autograd) is trapped in machine code in the
    child, and the parent compares every output with torch's kernels, so a finding of the source
    scans alone (a name that looks like torch's, an import never called, a scan past its bounds)
    is confirmed only by the run: a trap or block that fired, a fingerprint that matched, a
    backward in the trace (any other ``forbidden.*`` check's detection). Without that, the scan's
    check keeps its failure, no longer counts as a detection (which zeroes every family), and its
    message says the run did not confirm it. The same at every sandbox level, so that the
    pre-check predicts the server: at ``none`` and ``local`` a child could undo the trap, and would
    only fool its own pre-check (the server grades at ``strict``, where it cannot)."""
    if any(c.details.get("detected") for c in report.checks
           if c.id.startswith("forbidden.") and c.id not in STATIC_SCANS):
        return
    for c in report.checks:
        if c.id in STATIC_SCANS and c.details.get("detected"):
            c.details["detected"], c.details["unconfirmed_by_run"] = False, True
            c.message += T(" (the run did not confirm it: nothing forbidden ran, nothing was blocked and no output "
                           "matched torch's kernels, so only this check's points are lost)")


def _run_checks(report, session, t, seed, device, add, progress, total, smallest=False, observe=None,
                analysis=None):
    ctx = Context(session, t, seed, device, CHECK_SECONDS, smallest=smallest, observe=observe, analysis=analysis)
    checks_started = time.monotonic()
    per_check, crashes = {}, 0
    main = [c for c in t.checks if not c.post]
    post = [c for c in t.checks if c.post]
    ctx.start("forbidden.runtime")
    ctx.fingerprint_samples = fresh_samples(ctx)  # before anything can use up the time budget
    kernel = kernel_output(t.fingerprint, ctx.fingerprint_samples)
    gates = {c.id: c.gates for c in t.checks if c.gates}  # once one fails, its families score nothing
    for i, check in enumerate(main):
        if progress:
            progress(check.id, 3 + i, total)
        # Once the verdict is zero whatever follows, nothing more is run (forbidden.runtime says why;
        # the source scans call nothing and still run). A static finding alone does not stop the run:
        # only the run can confirm it (``_unconfirmed_static``).
        scan = check.id in STATIC_SCANS
        if kernel and not scan:
            add(check.id, False, T("skipped: built-in attention is not allowed, so nothing else is graded"),
                {"skipped": True})
            continue
        if session.protocol_violations and not scan:
            add(check.id, False, T("skipped: your program wrote to the grader's answer channel, so "
                                   "nothing it computes can be trusted and nothing else is graded"),
                {"skipped": True})
            continue
        gate = next((g for g in gates if check.family in gates[g]), None)
        if gate and check.id != gate and any(c.id == gate and gate_closed(c) for c in report.checks):
            add(check.id, False, T("skipped: these points rest on {check}, which did not pass", check=gate),
                {"skipped": True})
            continue
        if crashes >= CRASH_LIMIT:
            add(check.id, False, T("skipped: your function crashed or hung in {crashes} checks, so the "
                                   "remaining checks were not run", crashes=crashes), {"skipped": True})
            continue
        crashes += _run_one(ctx, check, add, per_check) is None
    if not kernel and not any(c.id == "forbidden.static" and c.details.get("detected") for c in report.checks):
        # A name for failures no catalogue bug explains, before the post phase: like a catalogue bug,
        # an output that is attention with a wrong factor shows the function computes attention.
        name_the_rest(report.checks, ctx, t)
    for i, check in enumerate(post):  # never skipped: their verdict is what the others' points rest on
        if progress:
            progress(check.id, 3 + len(main) + i, total)
        _run_one(ctx, check, add, per_check)
    _unconfirmed_static(report)
    post_ids = frozenset(c.id for c in post)
    facts = Facts(detected=any(c.details.get("detected") for c in report.checks if c.id.startswith("forbidden.")),
                  unverified=any(c.id in post_ids and not c.passed for c in report.checks),
                  shown=_attention_shown(report, ctx), post=post_ids)
    report.drawn = drawn_edges(t, ctx.drawn, {c.id for c in report.checks if c.max_points})
    report.timings.update({"checks_s": round(time.monotonic() - checks_started, 3), "calls": ctx.calls,
                           "per_check_s": per_check})
    return facts
