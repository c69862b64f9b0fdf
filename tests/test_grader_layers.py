"""The grader's imports run one way: tasks use the check families, never the reverse.

A task folder (grader/tasks/<id>/) holds everything that is that task's own and hands the rest
(its reference for the diagnosis, its gates, its catalogue) to the shared code through ``Grading``;
a check family written once for every task knows no task folder. The circle this keeps away
(checks -> a task folder -> the checks) made the order of imports decide what a module saw.
"""
from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parent.parent / "grader"
SHARED = ["checks", "sandbox", "scoring.py", "causes.py", "grading.py", "bounded.py", "source.py"]


def _imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports, at module level or inside a function."""
    package = ".".join(path.relative_to(GRADER.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _shared_files():
    for name in SHARED:
        target = GRADER / name
        yield from (sorted(target.rglob("*.py")) if target.is_dir() else [target])


FOLDERS = tuple(f"grader.tasks.{p.name}" for p in (GRADER / "tasks").iterdir() if (p / "__init__.py").exists())


def test_the_shared_grader_code_imports_no_task_folder():
    """``grader.tasks`` itself (``Task``, ``Grading``, the registry) is the shared contract; a task
    folder is not."""
    assert len(FOLDERS) >= 6
    offenders = {str(path.relative_to(GRADER)): sorted(m for m in _imports(path) if m.startswith(FOLDERS))
                 for path in _shared_files()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_scan_sees_relative_imports(tmp_path):
    """The test above can fail: a relative import of a task folder is resolved to its full name."""
    probe = GRADER / "checks" / "at_scale.py"
    assert "grader.checks.base" in _imports(probe)
    assert "reference_impl" in _imports(probe)
    backward = GRADER / "tasks" / "sdpa_backward" / "at_scale.py"
    assert "grader.checks.at_scale" in _imports(backward)
    assert "grader.tasks.sdpa_backward.checks" in _imports(backward)
