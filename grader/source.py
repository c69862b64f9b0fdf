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
