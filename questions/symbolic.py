"""The ``expression`` kind: a formula typed as an answer, graded as any equivalent expression.

``d_k*(1 + 2*mu^2)``, ``d_k + 2 d_k mu²`` and ``(1+2μ^2)·dk`` are one answer. The question
lists the names an answer may use (``variables: [d_k, mu]``); a name may also be written
without its underscore (``dk``) or, for the usual Greek names, as the letter (``μ``, ``ρ``).

Reading is done by sympy's ``parse_expr``, but never on raw student text: the text is first
tokenised here against a whitelist (numbers, the question's names, ``sqrt``, ``log``, ``exp``,
``+ - * / ^ ( )``), so the string sympy evaluates holds nothing else; ``parse_expr`` then runs
with two transformations only (numbers as exact sympy numbers, implicit multiplication) and a
dictionary of exactly those names. Input is bounded in length, in the size of its numbers and
in its powers (a power's exponent must be a number of at most ``MAX_EXPONENT``, and nested
powers may not multiply past it), so reading and comparing take a bounded, small time.

Two expressions are the same answer when they agree at ``POINTS`` fixed points (each name a
positive number drawn once from a fixed seed), relative to 1e-9: the same on every run, and
true of any two forms of one formula (a polynomial identity cannot hold at random points by
chance, except with probability zero).
"""
from __future__ import annotations

import math
import random
import re

MAX_LENGTH = 200
MAX_EXPONENT = 12
MAX_NESTING = 2
POINTS = 6
FUNCTIONS = ("sqrt", "log", "exp")
GREEK = {"μ": "mu", "ρ": "rho", "σ": "sigma", "α": "alpha", "β": "beta", "λ": "lambda_", "τ": "tau"}
_SUPERSCRIPTS = str.maketrans({"²": "^2", "³": "^3", "⁴": "^4", "−": "-", "–": "-", "·": "*", "×": "*",
                               "⋅": "*", "√": "sqrt"})
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([A-Za-z][A-Za-z0-9_]*)|(\*\*|[-+*/^()]))")
MAX_DIGITS = 6


class ExpressionError(ValueError):
    """An answer that cannot be read (the message says why, for the student)."""


def _names(variables: list[str]) -> dict[str, str]:
    """Every accepted spelling of a name -> the name: ``d_k`` and ``dk``; ``mu`` and ``μ``."""
    out = {v: v for v in variables}
    out.update({v.replace("_", ""): v for v in variables if "_" in v})
    return out


def _tokens(text: str, variables: list[str]) -> str:
    """``text`` rewritten from whitelisted tokens only, ready for ``parse_expr``."""
    for letter, name in GREEK.items():
        text = text.replace(letter, f" {name} ")
    text = text.translate(_SUPERSCRIPTS)
    names = _names(variables)
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"cannot read {text[pos:].strip()[:10]!r}")
        number, name, op = m.groups()
        if number:
            if len(number.replace(".", "")) > MAX_DIGITS:
                raise ExpressionError(f"numbers of at most {MAX_DIGITS} digits, please")
            out.append(number)
        elif name:
            if name in FUNCTIONS:
                out.append(name)
            elif name in names:
                out.append(names[name])
            else:
                raise ExpressionError(f"unknown name {name!r}; use {', '.join(variables)}")
        else:
            out.append("**" if op == "^" else op)
        pos = m.end()
    if not out:
        raise ExpressionError("the expression is empty")
    return " ".join(out)


def parse(text, variables: list[str]):
    """A sympy expression for ``text``; :class:`ExpressionError` if it cannot be read."""
    import sympy
    from sympy.parsing.sympy_parser import auto_number, implicit_multiplication, parse_expr
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("expected an expression such as d_k*(1 + x^2)")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"the expression is too long (at most {MAX_LENGTH} characters)")
    source = _tokens(text, variables)
    local = {v: sympy.Symbol(v, positive=True) for v in variables}
    local.update(sqrt=sympy.sqrt, log=sympy.log, exp=sympy.exp)
    # what auto_number and evaluate=False write into the code sympy evaluates, and nothing else
    global_ = {"Integer": sympy.Integer, "Float": sympy.Float, "Rational": sympy.Rational,
               "Add": sympy.Add, "Mul": sympy.Mul, "Pow": sympy.Pow}
    try:
        # unevaluated first, so the powers can be checked before anything is multiplied out
        tree = parse_expr(source, local_dict=local, global_dict=global_,
                          transformations=(auto_number, implicit_multiplication), evaluate=False)
    except Exception:  # noqa: BLE001 - whatever sympy makes of a bad input, it is a format error
        raise ExpressionError(f"cannot read {text.strip()[:40]!r} as an expression") from None
    if not isinstance(tree, sympy.Expr) or isinstance(tree, sympy.Tuple):
        raise ExpressionError(f"cannot read {text.strip()[:40]!r} as an expression")
    if _power(tree) > MAX_EXPONENT:
        raise ExpressionError(f"an exponent must be a number, at most {MAX_EXPONENT}")
    if _depth(tree) > MAX_NESTING:
        raise ExpressionError(f"functions nested more than {MAX_NESTING} deep are not needed here")
    return tree


def _power(node) -> float:
    """The largest product of nested exponents in ``node`` (x^2 -> 2, (x^3)^4 -> 12)."""
    import sympy
    if isinstance(node, sympy.Pow):
        exponent = node.exp
        if exponent.free_symbols:
            return math.inf  # a name in an exponent: not a formula this kind asks for
        if not exponent.is_Number and _power(exponent) > MAX_EXPONENT:
            return math.inf
        try:
            size = abs(float(exponent))
        except (TypeError, ValueError):
            return math.inf
        return max(1.0, size) * _power(node.base)
    return max([1.0] + [_power(a) for a in node.args])


def _depth(node) -> int:
    """How deeply sqrt, log and exp are nested (exp(exp(exp(exp(x)))) would be astronomically large)."""
    import sympy
    inner = max([0] + [_depth(a) for a in node.args])
    return inner + isinstance(node, (sympy.exp, sympy.log)) if node.args else 0


def _points(variables: list[str]) -> list[dict[str, float]]:
    rng = random.Random("attn-grader:expression")
    return [{v: round(rng.uniform(0.3, 3.0), 6) for v in variables} for _ in range(POINTS)]


def values(tree, variables: list[str]) -> list[complex]:
    import sympy
    symbols = {v: sympy.Symbol(v, positive=True) for v in variables}
    out = []
    for point in _points(variables):
        try:
            out.append(complex(tree.xreplace({symbols[v]: sympy.Float(x) for v, x in point.items()}).evalf(30)))
        except Exception:  # noqa: BLE001 - not a finite number at this point: never equal to anything
            out.append(complex(math.nan))
    return out


def same(a: list[complex], b: list[complex]) -> bool:
    """Whether two expressions' values agree at every point (relative 1e-9)."""
    return all(math.isfinite(x.real) and math.isfinite(y.real) and
               abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y)) for x, y in zip(a, b))


def pretty(text: str) -> str:
    """The key as people write it: ``d_k·(1 + 2·mu²)``."""
    out = re.sub(r"\s*\*\s*", "·", text.replace("**", "^"))
    return re.sub(r"\^(\d)", lambda m: m.group(1).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")), out)


def spellings(text: str, variables: list[str]) -> list[str]:
    """Ways to write the key for an LMS that compares strings: as written in the file, with ``^``
    or ``**``, with and without spaces, and sympy's expanded and factored forms."""
    import sympy
    tree = parse(text, variables)
    forms = [text, str(sympy.expand(tree)), str(sympy.factor(tree))]
    out: list[str] = []
    for form in forms:
        for power in (form.replace("^", "**"), form.replace("**", "^")):
            for spaced in (power, power.replace(" ", "")):
                if spaced not in out:
                    out.append(spaced)
    return out


def check_structure(p, data: dict, names: set[str]) -> None:
    from .schema import NAME_RE, _texts
    variables = data.get("variables")
    if not isinstance(variables, list) or not variables or not all(
            isinstance(v, str) and NAME_RE.match(v) and v not in FUNCTIONS for v in variables) \
            or len(set(variables)) != len(variables):
        p.add("variables", "must list the names the answer may use, e.g. [d_k, mu]")
        return
    for field, text in [("answer", data.get("answer"))] + [
            (f"mistakes[{i}].value", m.get("value") if isinstance(m, dict) else None)
            for i, m in enumerate(data.get("mistakes") or [])]:
        try:
            parse(text if isinstance(text, str) else "", variables)
        except ExpressionError as exc:
            p.add(field, f"{exc}")
    for i, m in enumerate(data.get("mistakes") or []):
        if isinstance(m, dict):
            _texts(p, f"mistakes[{i}].feedback", m.get("feedback"), names)
