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

from .i18n import T

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


def defines_name(source: str, name: str, tree: ast.AST | None = None) -> bool | None:
    """Whether the module binds ``name`` at its top level (a def or class, an assignment, an import
    as that name, also inside a top-level if/try/with/for), or could (the name is spelled in a
    string, as for ``globals()[...]``); None where the source does not parse (the grader says why).
    Only a file that surely does not define the function is refused before grading. ``tree`` is
    ``source`` already parsed; the web app asks through ``bounded.defined``, in a limited process."""
    if tree is None:
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


def parse_failure(problem: dict) -> tuple:
    """The student's message (and details) for a file ``grader/bounded.py``'s ``parse`` refused."""
    error = problem["error"]
    if error == "deep":
        return T("Python cannot parse your file: expressions or blocks nest too deeply for its parser "
                 "(thousands of operators, brackets or attributes in one chain); split them into shorter "
                 "statements"), {}
    if error in ("size", "nodes"):
        what = T("{count} bytes, at most {limit}", count=problem["count"], limit=problem["limit"]) \
            if error == "size" else \
            T("{count} syntax nodes, at most {limit}", count=problem["count"], limit=problem["limit"])
        return T("your file is too large for the grader to analyse ({what}): a solution needs far less; "
                 "remove generated or pasted code", what=what), {"bound": error}
    if error == "value":  # null bytes
        return T("Python cannot parse your file: {error}", error=problem["msg"]), {}
    exc = SyntaxError(problem["msg"], ("submission.py", problem["lineno"], problem["offset"], problem["text"],
                                       problem["end_lineno"], problem["end_offset"]))
    message = T("Python cannot parse your file: {error} (line {line}, column {column})", error=exc.msg,
                line=exc.lineno, column=exc.offset) if exc.offset and exc.lineno else \
        T("Python cannot parse your file: {error} (line {line})", error=exc.msg, line=exc.lineno) \
        if exc.lineno else T("Python cannot parse your file: {error}", error=exc.msg)
    return message, syntax_error_place(exc)


def syntax_error_place(exc: SyntaxError) -> dict:
    """Where Python stopped reading, as data a page or a terminal shows: the line and column
    (1-based), the source line, and ``caret``: that line over a row of ``^`` under the spot."""
    text = (exc.text or "").rstrip("\r\n")
    place = {"line": exc.lineno, "offset": exc.offset, "text": text.rstrip()[:200]}
    if exc.offset and text and exc.offset <= len(text) + 1:
        end = exc.end_offset if (getattr(exc, "end_lineno", None) == exc.lineno and exc.end_offset
                                 and exc.end_offset > exc.offset) else exc.offset + 1
        end = min(end, len(text) + 2)
        # the caret lines up under tabs too: keep them in the padding
        pad = "".join("\t" if ch == "\t" else " " for ch in text[: exc.offset - 1])
        number = f"{exc.lineno} | "
        place["end_offset"] = end
        place["caret"] = (f"{number}{text}\n" + " " * len(number) + pad + "^" * (end - exc.offset))[:1000]
    return place
