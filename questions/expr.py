"""A tiny, safe expression language for parameter formulas in the question files.

Formulas such as ``d_model // h`` or ``1 / sqrt(d_k)`` are parsed with :mod:`ast` and
walked node by node; only numbers, parameter names, arithmetic, comparisons, ``and``/
``or``/``not``, conditional expressions and a short list of pure math functions are
allowed. Nothing is ever passed to ``eval``, attribute access and subscripts are
rejected, and exponents are capped so that ``10 ** 10 ** 10`` cannot hang the loader.
"""
from __future__ import annotations

import ast
import functools
import math
import operator
import unicodedata


def halfwidth(text: str) -> str:
    """Full-width forms as their ASCII twins: a Chinese or Japanese input method types
    "（２，８）" for "(2,8)". Only the width forms are folded (NFKC on those characters): NFKC on
    the whole text would also turn "n²" into "n2", which the answer readers read differently."""
    return "".join(unicodedata.normalize("NFKC", ch)
                   if unicodedata.decomposition(ch).startswith(("<wide>", "<narrow>")) else ch
                   for ch in text)


FUNCTIONS = {
    "sqrt": math.sqrt, "log": math.log, "log2": math.log2, "log10": math.log10,
    "exp": math.exp, "abs": abs, "min": min, "max": max, "round": round,
    "floor": math.floor, "ceil": math.ceil, "int": int, "float": float,
}

_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}
MAX_EXPONENT = 64
MAX_MAGNITUDE = 1e300


class ExprError(ValueError):
    """A formula that is malformed, uses something not allowed, or fails to evaluate."""


def parse(source: str) -> ast.Expression:
    """The checked syntax tree of ``source``; cached, since validation evaluates the same few
    formulas for every variant (the trees are only read, never changed)."""
    return _parse(source if isinstance(source, str) else str(source))


@functools.lru_cache(maxsize=4096)
def _parse(source: str) -> ast.Expression:
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse {source!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        _check_node(node, source)
    return tree


def _check_node(node: ast.AST, source: str) -> None:
    allowed = (ast.Expression, ast.Constant, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp,
               ast.Compare, ast.BoolOp, ast.And, ast.Or, ast.IfExp, ast.Call,
               *_BINARY, *_UNARY, *_COMPARE)
    if not isinstance(node, allowed):
        raise ExprError(f"{type(node).__name__} is not allowed in a formula: {source!r}")
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)) \
            or isinstance(node, ast.Constant) and isinstance(node.value, bool):
        raise ExprError(f"only numbers may appear as constants: {source!r}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ExprError(f"unknown function in {source!r}; allowed: {', '.join(sorted(FUNCTIONS))}")
        if node.keywords:
            raise ExprError(f"keyword arguments are not allowed: {source!r}")


def names(source: str) -> set[str]:
    """The parameter names a formula reads (function names excluded)."""
    tree = parse(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def evaluate(source: str | int | float, env: dict[str, float]) -> float | int | bool:
    """Evaluate ``source`` with the parameter values in ``env``."""
    if isinstance(source, bool):
        raise ExprError("a formula must be a number or an expression, not true/false")
    if isinstance(source, (int, float)):
        return source
    tree = parse(source)
    try:
        return _eval(tree.body, env, source)
    except ExprError:
        raise
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise ExprError(f"{source!r} failed with {dict(sorted(env.items()))}: {exc}") from None


def _eval(node: ast.AST, env: dict, source: str):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"unknown name {node.id!r} in {source!r}")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env, source), _eval(node.right, env, source)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ExprError(f"exponent {right} is too large in {source!r}")
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, (int, float)) and abs(result) > MAX_MAGNITUDE:
            raise ExprError(f"{source!r} overflows")
        return result
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, env, source))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, source)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator, env, source)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env, source) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.IfExp):
        branch = node.body if _eval(node.test, env, source) else node.orelse
        return _eval(branch, env, source)
    if isinstance(node, ast.Call):
        args = [_eval(a, env, source) for a in node.args]
        return FUNCTIONS[node.func.id](*args)
    raise ExprError(f"unsupported expression in {source!r}")  # unreachable after _check_node
