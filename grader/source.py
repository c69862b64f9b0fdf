"""Parsing the student's Python in the grader's own process (torch-free: the web app uses it too).

The parent scans the text it parsed, and the child runs that very text (``submission_text`` is
the one decoding of what a student sent; the harness compiles it as ``str``, so a coding cookie
cannot make the child read other code than the parent scanned).
"""
from __future__ import annotations

import ast
import codecs
import re
import threading

_AST_LOCK = threading.Lock()
BOM = "\ufeff"


class SourceTooDeep(SyntaxError):
    """Python's parser gave up on nesting (RecursionError or MemoryError inside ``ast.parse``):
    a ``SyntaxError``, so that every caller that refuses unparsable code refuses this too."""


def parse_python(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse``, one at a time: CPython 3.11 can fail with "AST constructor recursion depth
    mismatch" (a SystemError) when two threads parse at once, as two grading threads do.

    Deep nesting (20 KB of ``1+1+…``: RecursionError; 100 KB of unary minus: MemoryError from
    the parser's own stack guard) raises ``SourceTooDeep``, never those errors themselves."""
    with _AST_LOCK:
        try:
            return ast.parse(source, mode=mode)
        except (RecursionError, MemoryError) as exc:
            kind = "recursion" if isinstance(exc, RecursionError) else "parser stack"
            raise SourceTooDeep(f"expressions or blocks nest too deeply for Python's parser ({kind} limit)") \
                from None


def submission_text(source: str | bytes) -> str:
    """The text of a submission as the grader reads, scans and runs it: UTF-8 without a leading
    byte-order mark (Windows editors write one). Raises ``UnicodeDecodeError`` for bytes that are
    not UTF-8 and ``UnicodeEncodeError`` for text no UTF-8 file can hold (a lone surrogate)."""
    text = source.decode("utf-8") if isinstance(source, (bytes, bytearray)) else str(source)
    text.encode("utf-8")  # a str from elsewhere may hold lone surrogates: no file can carry them
    return text[1:] if text.startswith(BOM) else text


def dotted(node: ast.AST, limit: int = 160) -> str:
    """``torch.nn.functional.f`` for an attribute chain, without recursion (``ast.unparse`` recurses
    once per link and raises RecursionError on a 900-deep chain): at most ``limit`` characters."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            parts.append("()")
            node = node.func
        elif isinstance(node, ast.Subscript):
            parts.append("[]")
            node = node.value
        else:
            break
    root = node.id if isinstance(node, ast.Name) else "…"
    text = root
    for part in reversed(parts):
        text += part if part in ("()", "[]") else "." + part
    return text if len(text) <= limit else text[: limit // 2 - 1] + "…" + text[-(limit // 2):]


_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")  # PEP 263


def foreign_coding(text: str) -> str | None:
    """The encoding a coding cookie on the first two lines declares, where it is not UTF-8: the
    grader reads every file as UTF-8 and ignores the cookie (None where there is none to ignore)."""
    for line in text.splitlines()[:2]:
        found = _COOKIE.match(line)
        if found:
            try:
                name = codecs.lookup(found.group(1)).name
            except LookupError:
                return found.group(1)
            return None if name == "utf-8" else found.group(1)
        if line.strip() and not line.lstrip().startswith("#"):
            return None  # PEP 263: the cookie's second line counts only after a comment or blank line
    return None
