"""Every analysis of a student's text runs here: in a short-lived, limited process of its own.

Parsing and the static scans walk a tree the student shapes, so a blow-up there (an alias loop, a
quadratic pass, a tree of millions of nodes) must cost a throw-away process, never a grading
worker or the web app. Each call starts a fresh interpreter (``-I -S``: no site-packages, no torch;
about 40 ms) that first
limits itself (CPU time, address space), reads the source on stdin and writes one JSON line per
finished stage; the parent adds a wall-clock limit. A stage that did not finish is a
``BoundExceeded``, which the caller turns into a clear ``load.source`` or ``forbidden.*`` failure.
A grading asks for its parse and every scan its checks read in one call (``analyse``): one
interpreter's start and one parse per grading, not one per scan.

The bounds are fixed, so the same file meets them the same way on every run and under any load:
``MAX_SOURCE_BYTES`` and ``MAX_NODES`` are checked before any scan, ``CPU_SECONDS`` is the child's
own CPU time (not wall time, which a busy machine stretches), and ``WALL_SECONDS`` is only a backstop
far above it. The scans themselves are linear in the size of the tree (``checks/forbidden.py``,
``checks/autograd_ban.py``), so an ordinary file takes milliseconds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

MAX_SOURCE_BYTES = 1024 * 1024   # the web accepts 64 KiB; the CLI reads whatever it is given
MAX_NODES = 250_000              # syntax nodes; a 64 KiB file has at most about 40,000
CPU_SECONDS = 10                 # the child's CPU time for all its stages together
MEMORY_BYTES = 768 * 1024 * 1024  # the child's address space
WALL_SECONDS = 120               # a backstop only: the child runs no student code and never waits
SCANS = ("forbidden", "autograd")  # the static scans (checks/forbidden.py, checks/autograd_ban.py)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); from grader.bounded import _child; "
         "_child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])")


class BoundExceeded(Exception):
    """The analysis of ``stage`` went past a bound (``what``: "size", "nodes", "cpu", "memory",
    "time" or "crash"); ``detail`` is for the logs and the report's details."""

    def __init__(self, stage: str, what: str, detail: str = ""):
        super().__init__(f"{stage}: {what} {detail}".strip())
        self.stage, self.what, self.detail = stage, what, detail


class Analysis:
    """The parse of one text and the static scans asked for with it, from one limited process.

    ``problem``: as ``parse`` returns it. ``findings(kind)``: as ``scan`` returns it, or the
    ``BoundExceeded`` that scan met, raised again where it is read."""

    def __init__(self, out: dict, scans: tuple[str, ...]):
        self.problem, self._out, self.scans = out["parse"], out, scans

    def findings(self, kind: str) -> list[dict]:
        if kind not in self.scans:
            raise ValueError(f"the scan {kind!r} was not asked for (asked: {', '.join(self.scans) or 'none'})")
        problem = self.problem
        if problem:
            if problem["error"] in ("size", "nodes"):
                raise BoundExceeded(kind, problem["error"], f"{problem['count']} > {problem['limit']}")
            raise SyntaxError(problem.get("msg") or problem["error"])
        if kind not in self._out:
            raise BoundExceeded(kind, *self._out["_stopped"])
        return self._out[kind]


def analyse(source: str, scans=()) -> Analysis:
    """The parse of ``source`` and the scans ``scans`` ("forbidden", "autograd") in one limited
    process, the parse done once: a grading's whole static analysis for one interpreter's start.
    Raises ``BoundExceeded`` when the parse itself ran out of time or memory."""
    scans = tuple(scans)
    unknown = set(scans) - set(SCANS)
    if unknown:
        raise ValueError(f"unknown scan {sorted(unknown)[0]!r}; choose from {', '.join(SCANS)}")
    out = _run(source, ["parse", *scans])
    return Analysis(out, scans)


def parse(source: str) -> dict | None:
    """None where ``source`` parses within the bounds, else why not: {"error": "syntax", "msg",
    "lineno", "offset", "text", "end_lineno", "end_offset"}, {"error": "deep"} (Python's parser
    gave up on nesting), {"error": "value", "msg"} (null bytes), or {"error": "size"|"nodes",
    "count", "limit"}. Raises ``BoundExceeded`` when the parse itself ran out of time or memory."""
    return analyse(source).problem


def scan(source: str, kind: str) -> list[dict]:
    """The findings of the static scan ``kind`` ("forbidden" or "autograd") as {line, what}.
    Raises ``BoundExceeded`` where the file is past a bound or the scan did not finish in them,
    and ``SyntaxError`` where it does not parse (grading parses first, so only a direct caller sees it)."""
    return analyse(source, (kind,)).findings(kind)


def defined(source: str, names: list[str]) -> dict:
    """{name: ``source.defines_name`` for each name}; every value None where the file does not
    parse or is past a bound (then the grader, not this check, says why)."""
    try:
        out = _run(source, ["parse", "defines", *names])
    except BoundExceeded:
        return {name: None for name in names}
    return out.get("defines") or {name: None for name in names}


def parses(texts: list[str]) -> list[bool | None]:
    """Whether each text parses (a notebook's cells), all in one limited process; None for every
    text where the process went past a bound."""
    try:
        out = _run(json.dumps(texts), ["parses"])
    except BoundExceeded:
        return [None] * len(texts)
    return out.get("parses") or [None] * len(texts)


def top_level_defs(source: str, name: str) -> list[int]:
    """The lines of the module-level ``def name`` statements of ``source`` (empty where it does
    not parse or is past a bound)."""
    try:
        out = _run(source, ["parse", "defs", name])
    except BoundExceeded:
        return []
    return out.get("defs") or []


def _run(source: str, stages: list[str]) -> dict:
    data = source.encode("utf-8", "surrogatepass")
    if len(data) > MAX_SOURCE_BYTES:
        return {"parse": {"error": "size", "count": len(data), "limit": MAX_SOURCE_BYTES}}
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _BOOT, _ROOT, str(CPU_SECONDS), str(MEMORY_BYTES),
                               *stages], input=data,
                              capture_output=True, timeout=WALL_SECONDS, check=False)
    except subprocess.TimeoutExpired:  # run() has killed it
        out, why = {}, ("time", f"over {WALL_SECONDS} s of wall-clock time")
    else:
        out = {}
        for line in done.stdout.splitlines():
            try:
                out.update(json.loads(line))
            except ValueError:  # a line cut short where the child was stopped mid-write
                break
        why = _why(done.returncode, done.stderr)
    if not out:
        raise BoundExceeded(stages[0], *why)
    out["_stopped"] = why
    return out


def _why(returncode: int, stderr: bytes) -> tuple[str, str]:
    """What stopped the child, from how it ended: SIGXCPU (or SIGKILL past the hard limit) for CPU
    time, a MemoryError for the address space, anything else a crash."""
    if returncode in (-24, -9):
        return "cpu", f"over {CPU_SECONDS} s of CPU time"
    if b"MemoryError" in stderr[-2000:]:
        return "memory", f"over {MEMORY_BYTES // 2**20} MiB of memory"
    tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {returncode}"]
    return "crash", tail[0][:200]


def _child(cpu_seconds: int, memory_bytes: int, stages: list[str]) -> None:
    """The limited process: limits first, then each stage in turn, one JSON line each."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 2))
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ValueError, OSError):  # macOS (a student's pre-check) refuses it: the CPU bound remains
        pass
    source = sys.stdin.buffer.read().decode("utf-8", "surrogatepass")
    tree = None

    def emit(key, value):
        sys.stdout.write(json.dumps({key: value}) + "\n")
        sys.stdout.flush()

    for i, stage in enumerate(stages):
        if stage == "parses":
            from .source import parse_python

            def ok(text):
                try:
                    parse_python(text)
                    return True
                except (SyntaxError, ValueError):
                    return False
            emit(stage, [ok(text) for text in json.loads(source)])
            return
        if stage == "parse":
            tree, problem = _parse(source)
            emit("parse", problem)
            if problem:
                return
        elif stage == "forbidden":
            from .checks.forbidden import scan_tree
            emit(stage, scan_tree(tree))
        elif stage == "autograd":
            from .checks.autograd_ban import scan_tree
            emit(stage, scan_tree(tree))
        elif stage == "defs":
            import ast
            emit(stage, [node.lineno for node in tree.body
                         if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == stages[i + 1]])
            return
        elif stage == "defines":
            from .source import defines_name
            emit(stage, {name: defines_name(source, name, tree) for name in stages[i + 1:]})
            return


def _near_memory_limit() -> bool:
    """Whether this process's address space came within 16 MiB of its limit (both of the parser's
    MemoryErrors, its stack guard and an allocation that failed, say nothing else)."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    try:
        with open("/proc/self/status") as status:
            peak = next((int(line.split()[1]) * 1024 for line in status if line.startswith("VmPeak:")), 0)
    except OSError:  # no /proc (macOS): no address-space limit was set there either
        return False
    return limit != resource.RLIM_INFINITY and peak > limit - 16 * 2**20


def _parse(source: str):
    import ast

    from .source import SourceTooDeep, parse_python

    try:
        tree = parse_python(source)
    except SourceTooDeep as exc:
        if isinstance(exc.__context__, MemoryError) and _near_memory_limit():
            raise MemoryError from None  # out of this process's memory, not the parser's stack guard
        return None, {"error": "deep"}
    except SyntaxError as exc:
        return None, {"error": "syntax", "msg": exc.msg, "lineno": exc.lineno, "offset": exc.offset,
                      "text": exc.text, "end_lineno": getattr(exc, "end_lineno", None),
                      "end_offset": getattr(exc, "end_offset", None)}
    except ValueError as exc:  # null bytes
        return None, {"error": "value", "msg": str(exc) or "ValueError"}
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        return None, {"error": "nodes", "count": count, "limit": MAX_NODES}
    return tree, None
