"""The ``shape`` kind: read a short piece of code and give the shape of what it returns.

The key is a list of formulas over the question's parameters (``answer: [B, h, T, d_model // h]``);
each listed mistake is another shape with its feedback (the transpose forgotten, the heads not
split...). A student writes the shape as people do: ``(2, 8, 10, 16)``, ``[2, 8, 10, 16]``,
``torch.Size([2, 8, 10, 16])``, ``2 × 8 × 10 × 16`` or ``2x8x10x16``; anything else is a format
error, which costs no attempt.
"""
from __future__ import annotations

import re

from . import expr

_WRAPPERS = re.compile(r"^\s*(?:torch\s*\.\s*Size\s*\(\s*(.*?)\s*\)|(.*?))\s*$", re.S)
_SEPARATOR = re.compile(r"\s*(?:,|×|\*|[xXх])\s*|\s+")  # х: the Cyrillic letter on a Russian keyboard
MAX_RANK = 8


class ShapeError(ValueError):
    """A shape that cannot be read (the message is for the student)."""


def parse_shape(text) -> tuple[int, ...]:
    if isinstance(text, (list, tuple)) and all(isinstance(n, int) and not isinstance(n, bool) for n in text):
        return tuple(text)
    if not isinstance(text, str) or not text.strip() or len(text) > 120:
        raise ShapeError("expected a shape such as (2, 8, 10, 16)")
    text = expr.halfwidth(text)
    m = _WRAPPERS.match(text)
    body = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
    if body[:1] in "([" and body[-1:] in ")]":
        body = body[1:-1].strip()
    body = body.rstrip(",").strip()
    if not body:
        return ()
    parts = [p for p in _SEPARATOR.split(body) if p]
    if not parts or len(parts) > MAX_RANK or not all(p.isdigit() for p in parts):
        raise ShapeError(f"cannot read {text.strip()!r} as a shape; write it as (2, 8, 10, 16)")
    return tuple(int(p) for p in parts)


def shape_value(formulas: list, env: dict) -> tuple[int, ...]:
    out = []
    for f in formulas:
        value = expr.evaluate(f, env)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise expr.ExprError(f"{f!r} is not a size (got {value!r})")
        out.append(value)
    return tuple(out)


def shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def spellings(shape: tuple[int, ...]) -> list[str]:
    """Ways people write one shape, for an LMS that compares strings."""
    items = [str(n) for n in shape]
    out = []
    for joined in (", ".join(items), ",".join(items)):
        out += [f"({joined})", f"[{joined}]", joined, f"torch.Size([{joined}])"]
    out += [" × ".join(items), "×".join(items), " x ".join(items), "x".join(items)]
    return list(dict.fromkeys(out))


def check_structure(p, data: dict, names: set[str]) -> None:
    from .schema import _formula, _texts
    for field, value in [("answer", data.get("answer"))] + [
            (f"mistakes[{i}].value", m.get("value") if isinstance(m, dict) else None)
            for i, m in enumerate(data.get("mistakes") or [])]:
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_RANK:
            p.add(field, f"must be a list of 1 to {MAX_RANK} size formulas")
            continue
        for j, f in enumerate(value):
            _formula(p, f"{field}[{j}]", f, names)
    for i, m in enumerate(data.get("mistakes") or []):
        if isinstance(m, dict):
            _texts(p, f"mistakes[{i}].feedback", m.get("feedback"), names)
