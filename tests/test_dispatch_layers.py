"""Dispatch calls down, never up (code review 2, change 3).

The queue's own modules (claim, reconciler, supervisor, broker, wakeup, threads) may import
the database and the models beneath them, and each other; never the services, LTI, the pages
or the commands above them, not even late inside a function (the reconciler's late import of
``services.quiz_grading`` was such an arrow). What a job's end writes is handed in by the
caller: ``claim.finish``/``release`` take the recording function, ``reconcile`` takes
``record_lost`` and the supervisor its ``housekeeping`` round.

``worker.py`` is the exception by design: it is a grading process's entry point, the one
place that joins the queue to the services that grade and record.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISPATCH = ROOT / "web" / "dispatch"
ENTRY_POINT = "worker.py"
BENEATH = ("web.db", "web.models", "web.dispatch")  # what the queue's modules stand on


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """Every module ``source`` imports, with its line, relative imports resolved against
    ``package``; imports inside functions and branches included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            # ``from .. import services`` names a module too
            found += [(node.lineno, f"{module}.{alias.name}") if not node.module else
                      (node.lineno, module) for alias in node.names]
    return found


def upward(source: str, package: str = "web.dispatch") -> list[str]:
    """The imports of the project's own ``web`` modules that are not beneath dispatch."""
    return [f"{line}: {module}" for line, module in imported_modules(source, package)
            if (module == "web" or module.startswith("web."))
            and not any(module == ok or module.startswith(ok + ".") for ok in BENEATH)]


def test_the_queue_modules_import_nothing_above_them():
    modules = sorted(p for p in DISPATCH.glob("*.py") if p.name != ENTRY_POINT)
    assert {p.name for p in modules} >= {"claim.py", "reconciler.py", "supervisor.py"}
    arrows = [f"web/dispatch/{path.name}:{arrow}" for path in modules
              for arrow in upward(path.read_text())]
    assert not arrows, "dispatch calls down, never up; hand the function in instead:\n" + \
        "\n".join(arrows)


def test_the_check_finds_an_upward_import():
    # The arrows this test exists to keep out, and imports it must leave alone.
    caught = ["from ..services.quiz_grading import fail_job",
              "def f():\n    from ..lti.passback import send_due",
              "from .. import services", "import web.pages.helpers",
              "from web.housekeeping import host_round"]
    passed = ["from ..db import write_session", "from ..models import JobStatus",
              "from . import wakeup", "from .broker import make_dispatcher",
              "import sqlalchemy", "from webob import Request"]
    assert all(upward(line) for line in caught)
    assert not any(upward(line) for line in passed)
