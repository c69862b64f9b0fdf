"""The ``big_o`` kind: a complexity typed as an expression, ``O(n^2 d)``, graded by its growth.

A student's expression is read into terms (a product of variables with rational powers and
log factors); constant factors are dropped, and so is a term that another one dominates
(``n^2 d + n d`` is ``n^2 d``: every variable grows at least as fast in the first). Two answers are
the same when their remaining terms are the same (a term under a power mean of two others
goes too: n·d under n² + d²), so ``O(d·n²)``, ``n**2*d``, ``2 n^2 d + n``
and ``n²d`` are all one answer. What students write is read generously: an optional ``O(…)``
(Latin, Cyrillic or Greek O, or Θ), ``^`` or ``**`` or superscript digits, ``·``, ``×`` or a
space or nothing for a product (``nd`` is n·d when n and d are variables), ``log``, ``sqrt``.
A name that is not one of the question's ``variables`` is a format error (no attempt lost).
"""
from __future__ import annotations

import itertools
import re
from fractions import Fraction

from . import expr

FUNCTIONS = {"log", "ln", "lg", "log2", "sqrt"}
_O_WRAPPER = re.compile(r"^\s*[OОΟΘ]\s*\((.*)\)\s*$", re.S)
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([A-Za-z_][A-Za-z_0-9]*)|(\*\*|[-+*/^()·×⋅]|[⁰¹²³⁴⁵⁶⁷⁸⁹]+))")

# A term: ((variable, power, log power), ...) sorted by variable; () is a constant.
Term = tuple


class BigOError(ValueError):
    """An expression that cannot be read (the message says why, for the student)."""


def _term(factors: dict) -> Term:
    return tuple(sorted((v, p, lp) for v, (p, lp) in factors.items() if p != 0 or lp != 0))


def _multiply(a: Term, b: Term) -> Term:
    out: dict = {}
    for v, p, lp in a + b:
        old = out.get(v, (Fraction(0), Fraction(0)))
        out[v] = (old[0] + p, old[1] + lp)
    return _term(out)


def _power(t: Term, k: Fraction) -> Term:
    return _term({v: (p * k, lp * k) for v, p, lp in t})


class _Parser:
    """Recursive descent over the tokens; a value is a frozenset of terms (a sum)."""

    def __init__(self, text: str, variables: list[str]):
        self.variables = variables
        self.tokens = self._tokenise(text)
        self.i = 0

    def _tokenise(self, text: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise BigOError(f"cannot read {text[pos:pos + 10]!r}")
            number, name, op = m.groups()
            if number:
                out.append(("num", number))
            elif name:
                out.extend(self._names(name))
            elif op and op[0] in "⁰¹²³⁴⁵⁶⁷⁸⁹":
                out += [("op", "^"), ("num", op.translate(_SUPERSCRIPTS))]
            else:
                out.append(("op", {"**": "^", "·": "*", "×": "*", "⋅": "*"}.get(op, op)))
            pos = m.end()
        if not out:
            raise BigOError("the expression is empty")
        return out

    def _names(self, name: str) -> list[tuple[str, str]]:
        if name in self.variables or name in FUNCTIONS:
            return [("name", name)]
        if all(c in self.variables for c in name):  # "nd": n·d
            return [t for c in name for t in (("name", c), ("op", "*"))][:-1]
        raise BigOError(f"unknown name {name!r}; use {', '.join(self.variables)}")

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def take(self):
        token = self.peek()
        self.i += 1
        return token

    def expect(self, op: str) -> None:
        if self.take() != ("op", op):
            raise BigOError(f"expected {op!r}")

    def parse(self) -> frozenset:
        value = self.sum()
        if self.peek()[0] != "end":
            raise BigOError(f"unexpected {self.peek()[1]!r}")
        return value

    def sum(self) -> frozenset:
        value = self.product()
        while self.peek() == ("op", "+"):
            self.take()
            value = value | self.product()
        if self.peek() == ("op", "-"):
            raise BigOError("write a sum of terms with +, not a difference")
        return value

    def product(self) -> frozenset:
        value = self.power()
        while True:
            kind, text = self.peek()
            if (kind, text) in (("op", "*"), ("op", "/")):
                self.take()
                right = self.power()
                if text == "/":
                    if len(right) != 1:
                        raise BigOError("divide by a single term only")
                    (t,) = right
                    right = frozenset({_power(t, Fraction(-1))})
            elif kind in ("num", "name") or (kind, text) == ("op", "("):
                right = self.power()  # juxtaposition: n^2 d, 2n, n log n
            else:
                return value
            value = frozenset(_multiply(a, b) for a in value for b in right)

    def power(self) -> frozenset:
        base = self.atom()
        if self.peek() == ("op", "^"):
            self.take()
            exponent = self.exponent()
            if len(base) == 1:
                (t,) = base
                return frozenset({_power(t, exponent)})
            if exponent.denominator != 1 or not 0 <= exponent <= 4:
                raise BigOError("raise a sum only to a small whole power")
            out = frozenset({()})
            for _ in range(int(exponent)):
                out = frozenset(_multiply(a, b) for a in out for b in base)
            return out
        return base

    def exponent(self) -> Fraction:
        """A number, a signed one, or one in parentheses: 2, -1, (1/2), (-1)."""
        if self.peek() == ("op", "("):
            self.take()
            value = self.exponent()
            if self.peek() == ("op", "/"):
                self.take()
                value /= self.exponent()
            self.expect(")")
            return value
        sign = 1
        if self.peek() == ("op", "-"):
            self.take()
            sign = -1
        kind, text = self.take()
        if kind != "num":
            raise BigOError("an exponent must be a number such as 2 or (1/2)")
        return sign * Fraction(text)

    def atom(self) -> frozenset:
        kind, text = self.take()
        if kind == "num":
            return frozenset({()})
        if (kind, text) == ("op", "("):
            value = self.sum()
            self.expect(")")
            return value
        if kind == "name" and text in FUNCTIONS:
            argument = self.atom() if self.peek() == ("op", "(") else self.power()
            if text == "sqrt":
                return frozenset(_power(t, Fraction(1, 2)) for t in argument) if len(argument) == 1 \
                    else self._sqrt_of_sum(argument)
            # log of a product of powers is a sum of logs; constants vanish
            variables = {v for t in argument for v, p, lp in t if p}
            return frozenset(_term({v: (Fraction(0), Fraction(1))}) for v in variables) or frozenset({()})
        if kind == "name":
            return frozenset({_term({text: (Fraction(1), Fraction(0))})})
        raise BigOError(f"unexpected {text or 'end'!r}")

    @staticmethod
    def _sqrt_of_sum(argument: frozenset) -> frozenset:
        # √(a + b) grows like √a + √b
        return frozenset(_power(t, Fraction(1, 2)) for t in argument)


def _growth(term: Term, variable: str) -> tuple:
    for v, p, lp in term:
        if v == variable:
            return (p, lp)
    return (Fraction(0), Fraction(0))


def _dominated(a: Term, b: Term, variables) -> bool:
    """Whether b grows at least as fast as a in every variable (and they differ)."""
    return a != b and all(_growth(a, v) <= _growth(b, v) for v in variables)


def _between(e: Term, a: Term, b: Term, variables) -> bool:
    """Whether e is at most a power mean of a and b: e ≤ λa + (1 − λ)b in every exponent for one
    λ in [0, 1], so that e ≤ max(a, b) everywhere (n·d under n² + d²). Terms with log factors
    are left to :func:`_dominated`."""
    if any(lp for t in (e, a, b) for _, _, lp in t):
        return False
    low, high = Fraction(0), Fraction(1)
    for v in variables:
        ev, av, bv = (_growth(t, v)[0] for t in (e, a, b))
        slope = av - bv
        if slope == 0:
            if ev > bv:
                return False
        elif slope > 0:
            low = max(low, (ev - bv) / slope)
        else:
            high = min(high, (ev - bv) / slope)
    return low <= high


def _redundant(t: Term, terms: frozenset, variables) -> bool:
    others = [u for u in terms if u != t]
    return any(_dominated(t, u, variables) for u in others) or any(
        _between(t, a, b, variables) for a, b in itertools.combinations(others, 2))


def canonical(text: str, variables: list[str]) -> frozenset:
    """The growth class of ``text``: its terms that no other term dominates."""
    if not isinstance(text, str) or not text.strip():
        raise BigOError("expected an expression such as O(n^2 d)")
    if len(text) > 200:
        raise BigOError("the expression is too long")
    text = expr.halfwidth(text)
    m = _O_WRAPPER.match(text)
    try:
        terms = _Parser(m.group(1) if m else text, variables).parse()
    except (ValueError, ZeroDivisionError, RecursionError) as exc:
        if isinstance(exc, BigOError):
            raise
        raise BigOError(f"cannot read {text!r}") from None
    names = {v for t in terms for v, _, _ in t}
    return frozenset(t for t in terms if not _redundant(t, terms, names))


def leading(terms: frozenset, variable: str) -> tuple:
    """How fast the class grows in one variable: the largest (power, log power) over its terms."""
    return max((_growth(t, variable) for t in terms), default=(Fraction(0), Fraction(0)))


# -- writing a class out: for the key shown to instructors and the LMS exports ----------------

def _factor(v: str, p: Fraction, lp: Fraction, style: str) -> list[str]:
    out = []
    if p:
        if p == 1:
            out.append(v)
        elif p.denominator == 1 and style == "super" and 2 <= p <= 9:
            out.append(v + str(p.numerator).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")))
        elif p == Fraction(1, 2):
            out.append(f"sqrt({v})")
        else:
            power = str(p) if p.denominator == 1 else f"({p})"
            out.append(f"{v}{'**' if style == 'python' else '^'}{power}")
    if lp:
        out.append(f"log {v}" if lp == 1 else f"log({v})^{lp}")
    return out


def text_of(terms: frozenset, style: str = "caret", joiner: str = " ", order=None) -> str:
    """One spelling of a class: ``n^2 d`` (caret), ``n**2*d`` (python), ``n²d`` (super)."""
    parts = []
    for t in sorted(terms, key=lambda t: [(v, -p) for v, p, _ in t]):
        factors = [f for v, p, lp in (order(t) if order else t) for f in _factor(v, p, lp, style)]
        parts.append(joiner.join(factors) if factors else "1")
    return " + ".join(parts)


def spellings(terms: frozenset, limit: int = 120) -> list[str]:
    """Common ways to write one class, for an LMS that compares strings (Moodle short answer,
    GIFT, QTI): factor orders × power styles × product signs, with and without ``O( )``."""
    out: list[str] = []
    single = len(terms) == 1
    orders = list(itertools.permutations(next(iter(terms)))) if single else [None]
    for order, style, joiner in itertools.product(orders, ("caret", "python", "super"), (" ", "*", "", "·")):
        if style == "python" and joiner != "*":
            continue
        pick = (lambda t, o=order: o) if order is not None else None
        body = text_of(terms, style, joiner, pick)
        for spelled in (f"O({body})", body):
            if spelled not in out:
                out.append(spelled)
    return out[:limit]


def check_structure(p, data: dict, names: set[str]) -> None:
    from .schema import _texts
    variables = data.get("variables")
    if not isinstance(variables, list) or not variables or not all(
            isinstance(v, str) and re.fullmatch(r"[A-Za-z]", v) for v in variables) \
            or len(set(variables)) != len(variables):
        p.add("variables", "must list the single-letter variables the answer may use, e.g. [n, d]")
        return
    for field, text in [("answer", data.get("answer"))] + [
            (f"mistakes[{i}].value", m.get("value") if isinstance(m, dict) else None)
            for i, m in enumerate(data.get("mistakes") or [])]:
        try:
            canonical(text if isinstance(text, str) else "", variables)
        except BigOError as exc:
            p.add(field, f"{exc}")
    for i, m in enumerate(data.get("mistakes") or []):
        if isinstance(m, dict):
            _texts(p, f"mistakes[{i}].feedback", m.get("feedback"), names)
