"""Parsing the student's Python in the grader's own process (torch-free: the web app uses it too)."""
from __future__ import annotations

import ast
import threading

_AST_LOCK = threading.Lock()


def parse_python(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse``, one at a time: CPython 3.11 can fail with "AST constructor recursion depth
    mismatch" (a SystemError) when two threads parse at once, as two grading threads do."""
    with _AST_LOCK:
        return ast.parse(source, mode=mode)


def defines_name(source: str, name: str) -> bool | None:
    """Whether the module binds ``name`` at its top level (a def or class, an assignment, an import
    as that name, also inside a top-level if/try/with/for), or could (the name is spelled in a
    string, as for ``globals()[...]``); None where the source does not parse (the grader says why).
    Only a file that surely does not define the function is refused before grading."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None

    def binds(node) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.name == name
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [item.optional_vars for item in node.items if item.optional_vars] if isinstance(node, ast.With) \
                else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return True
        return any(binds(child) for field in ("body", "orelse", "finalbody", "handlers")
                   for child in getattr(node, field, []) or [])

    if any(binds(node) for node in tree.body):
        return True
    return any(isinstance(node, ast.Constant) and isinstance(node.value, str) and name in node.value
               for node in ast.walk(tree))
