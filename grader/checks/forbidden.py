"""No built-in or reference attention: a static scan of the source and a run-time verdict.

The static scan reads the AST: attribute chains rooted at an imported name (or at a
name assigned from one: ``nnf = torch.nn.functional``), imports, and dynamic lookups
(getattr, importlib, __import__, eval/exec, __dict__, sys.modules) whose string
arguments, or the file's strings when the lookup name is computed, contain a fragment
of a forbidden name. A student's own function *named* ``scaled_dot_product_attention``
is fine: only reaching into torch or the reference is not.

At run time torch's own attention is switched off inside the child before the file is
imported (``sandbox/disarm.py``), so calling it raises wherever it is called from. The
verdict below always runs, after every other check, and rests on, in order:
tampering with the answer channel (seen by the parent), the parent's own fingerprint
(outputs bit-identical to torch's fused kernels, computed here on the same inputs:
``fingerprint.py``),
and what the child reports (blocked attempts, the aten trace), which is advisory but
can only incriminate. A detection zeroes everything but the load checks.
"""
from __future__ import annotations

import ast

from .. import bounded
from ..i18n import T
from ..source import dotted, parse_python

# This module imports no torch at load time: ``bounded`` runs ``scan_tree`` in a small process of
# its own, and what needs torch (the verdicts, the fingerprint) imports it where it is used.
FINDINGS_LIMIT = 50  # a report shows 5 and keeps 20; more cost time on a hostile file and say nothing new

# Names whose use means "let torch (or the grader) do the attention".
FORBIDDEN_ATTRS = {"scaled_dot_product_attention", "multi_head_attention_forward",
                   "MultiheadAttention", "sdpa_kernel", "TransformerEncoderLayer",
                   "TransformerDecoderLayer", "Transformer", "TransformerEncoder", "TransformerDecoder"}
FORBIDDEN_PREFIXES = ("_scaled_dot_product", "_flash_attention", "_efficient_attention",
                      "_cudnn_attention", "_fused_sdp", "_native_multi_head_attention",
                      "_transformer_encoder_layer", "_masked_softmax")
FORBIDDEN_MODULES = ("reference_impl", "grader", "flash_attn", "xformers", "transformers", "x_transformers",
                     "timm", "ctypes", "_ctypes", "cffi")
# Names that switch off or fool the run-time trace.
TAMPERING = {"DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch",
             "_disable_current_modes", "_pop_mode", "_push_mode", "_pop_mode_temporarily",
             "TorchFunctionMode", "TorchDispatchMode", "_set_torch_function_mode",
             "_len_torch_function_stack", "_get_function_stack_at", "_set_torch_dispatch_mode",
             "_unset_dispatch_mode", "_pop_torch_function_stack", "_push_on_torch_function_stack",
             "settrace", "setprofile", "_getframe", "f_back", "f_locals", "f_globals", "get_objects",
             "get_referrers", "get_referents", "_dispatch_library", "_destroy", "reload",
             "_DisarmOnImport", "RESPONSE_FD", "REQUEST_FD"}
# Fragments looked for in strings that feed a dynamic lookup.
FRAGMENTS = ("scaled_dot", "dot_product", "multi_head", "multihead", "flash", "efficient_att",
             "reference_impl", "sdpa", "cudnn_att", "_fused", "masked_softmax", "transformer",
             "ctypes", "cffi", "disarm")
DYNAMIC = {"getattr", "__import__", "import_module", "eval", "exec", "compile", "attrgetter",
           "methodcaller", "__getattribute__", "vars", "globals"}
# Run-time: a torch function or aten op whose name contains one of these is built-in attention.
RUNTIME_FRAGMENTS = ("scaled_dot_product", "multi_head_attention", "flash_attention",
                     "efficient_attention", "cudnn_attention", "_fused_sdp", "native_multi_head",
                     "transformer_encoder_layer", "masked_softmax", "module.reference_impl",
                     "module.grader")


def beyond_bounds(exc) -> str:
    """The student's message for a file the static scan could not finish within its bounds."""
    if exc.what in ("size", "nodes"):
        return T("your file is too large for the grader to check it for forbidden code ({detail}): "
                 "a solution needs far less; remove generated or pasted data", detail=exc.detail)
    return T("the grader could not finish checking your file for forbidden code within its limits "
             "({detail}): simplify it (long chains of names assigned from one another, deep nesting)",
             detail=exc.detail or exc.what)


def __getattr__(name: str):
    """What this module uses from torch-importing ones (the fingerprint's helpers and ``Fail``),
    loaded on first use."""
    if name in ("fresh_samples", "kernel_output"):
        from . import fingerprint
        return getattr(fingerprint, name)
    if name == "Fail":
        from .base import Fail
        return Fail
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_forbidden_name(name: str) -> bool:
    return name in FORBIDDEN_ATTRS or name.startswith(FORBIDDEN_PREFIXES)


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")


def _has_fragment(text: str) -> str | None:
    low = text.lower().replace(" ", "")
    return next((frag for frag in FRAGMENTS if frag in low), None)


def scan_source(source: str) -> list[dict]:
    """Findings as {line, what}; empty for a clean file. The source must parse. In this process:
    grading calls ``static_check``, which reads the scan made in a limited one (``bounded.analyse``)."""
    return scan_tree(parse_python(source))


class _Enough(Exception):
    """FINDINGS_LIMIT findings are in: the verdict is made."""


def scan_tree(tree: ast.AST) -> list[dict]:
    """``scan_source`` on a parsed tree: a fixed number of passes over its nodes, each linear."""
    findings: list[dict] = []
    try:
        _scan(tree, findings)
    except _Enough:
        pass
    seen, unique = set(), []
    for f in findings:
        if (f["line"], f["what"]) not in seen:
            seen.add((f["line"], f["what"]))
            unique.append(f)
    return unique


def _scan(tree: ast.AST, findings: list) -> None:
    imported: set[str] = set()

    def flag(node, what):
        findings.append({"line": getattr(node, "lineno", 0), "what": what})
        if len(findings) >= FINDINGS_LIMIT:
            raise _Enough

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.add((alias.asname or alias.name).split(".")[0])
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    flag(node, f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in FORBIDDEN_MODULES:
                flag(node, f"imports from {module}")
            for alias in node.names:
                imported.add(alias.asname or alias.name)
                if _is_forbidden_name(alias.name) and module.split(".")[0] in ("torch", ""):
                    flag(node, f"imports {module}.{alias.name}")
                if alias.name in TAMPERING:
                    flag(node, f"imports {alias.name}, which interferes with the grader's tracing")

    _follow_aliases(tree, imported)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    all_strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                   and isinstance(n.value, str) and id(n) not in docstrings]
    file_hit = []  # what the file's strings spell, worked out once (not once per dynamic call)
    # Links below the top of a chain (``a.b().c[0].d``): each chain is walked once, from its top.
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, (ast.Attribute, ast.Subscript))} \
        | {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)) and id(node) not in inner:
            links, root = _chain(node)
            for link in links:
                if _is_forbidden_name(link.attr) and root in imported:
                    flag(link, f"uses {dotted(link)}")
                elif link.attr in TAMPERING:
                    flag(link, f"uses {link.attr}, which interferes with the grader's tracing")
        if isinstance(node, ast.Name) and node.id in TAMPERING:
            flag(node, f"uses {node.id}, which interferes with the grader's tracing")
        elif isinstance(node, ast.Call) and _call_name(node) in DYNAMIC:
            args = node.args[1:] if _call_name(node) == "getattr" else node.args
            literal = [s for a in args for s in _strings(a)]
            texts = literal + ["".join(literal)]
            computed = any(not isinstance(a, ast.Constant) for a in args)
            hit = next((f for f in map(_has_fragment, texts) if f), None)
            if computed and not hit:  # the name is built elsewhere: look at every string in the file
                if not file_hit:
                    file_hit.append(next((f for f in map(_has_fragment, all_strings + ["".join(all_strings)])
                                          if f), None))
                hit = file_hit[0]
            if hit:
                flag(node, f"looks up a name containing {hit!r} dynamically ({_call_name(node)})")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            if _is_forbidden_name(node.slice.value) or (node.slice.value.split(".")[0] in FORBIDDEN_MODULES
                                                         and dotted(node.value).endswith("modules")):
                flag(node, f"looks up {node.slice.value!r} by subscript")


def _chain(node: ast.AST) -> tuple[list, str | None]:
    """The attribute links of the chain topped by ``node`` (outermost first) and its root name."""
    links = []
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            links.append(node)
        node = node.value if not isinstance(node, ast.Call) else node.func
    return links, node.id if isinstance(node, ast.Name) else None


def _follow_aliases(tree: ast.AST, imported: set) -> None:
    """Names bound to an expression rooted at an imported name count as imported themselves.

    One worklist pass, linear in the assignments: each name is added once and each assignment
    looked at once for its root, in any order and through any cycle (``x = x.nn``)."""
    by_root: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part, value in _pairs(target, node.value):
                    root = _root(value)
                    if root is not None:
                        by_root.setdefault(root, []).extend(alias_names(part))
    todo = list(imported)
    while todo:
        for name in by_root.pop(todo.pop(), ()):
            if name not in imported:
                imported.add(name)
                todo.append(name)


def _pairs(target: ast.AST, value: ast.AST) -> list[tuple]:
    """``a, b = torch.nn, 1`` as (a, torch.nn), (b, 1); any other assignment as one pair."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts) \
            and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts)):
        return list(zip(target.elts, value.elts))
    return [(target, value)]


def alias_names(target: ast.AST) -> list[str]:
    """The names an assignment target binds: itself, or those of a tuple or list it unpacks into.
    An attribute or subscript target (``self.proj = nn.Identity()``) binds no name: it stores into
    its object, which does not thereby become what is assigned."""
    names, todo = [], [target]
    while todo:
        t = todo.pop()
        if isinstance(t, ast.Name):
            names.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
    return names


def forbidden_ops(ops) -> list[str]:
    """Attention among torch's own operators (aten ops and torch functions, never the student's names)."""
    return sorted(op for op in ops if (op.startswith(("aten.", "torch.")) or op.startswith("module."))
                  and any(frag in op.lower() for frag in RUNTIME_FRAGMENTS))


def static_check(ctx) -> str:
    from .base import Fail

    try:
        findings = ctx.scanned("forbidden")
    except bounded.BoundExceeded as exc:
        raise Fail(beyond_bounds(exc), {"detected": True, "bound": exc.what, "limit": exc.detail}) from None
    if findings:
        lines = "; ".join(f"line {f['line']}: {f['what']}" for f in findings[:5])
        raise Fail(T("built-in or reference attention is not allowed: write the attention "
                     "yourself ({lines})", lines=lines), {"findings": findings[:20], "detected": True})
    return T("no built-in attention, reference import or trace tampering found in the source")


def _fingerprint(ctx) -> bool:
    """Some call's output is bit-for-bit torch's fused kernel's (``fingerprint.kernel_output``),
    one more call with fresh float64 inputs included."""
    import torch

    from .fingerprint import fresh_samples, kernel_output

    ctx.fingerprint_samples += fresh_samples(ctx, torch.float64)
    return kernel_output(ctx.task.fingerprint, list(ctx.samples) + ctx.fingerprint_samples)


def runtime_check(ctx) -> str:
    """The post-phase verdict: always run, after every other check (see the module docstring)."""
    from .base import Fail

    violations = list(ctx.session.protocol_violations)
    if violations:
        raise Fail(T("your program wrote to the grader's answer channel or tampered with the "
                     "grader's side of the sandbox ({value}); nothing it computed can be "
                     "trusted, so nothing is scored", value=violations[0]),
                   {"protocol": violations[:5], "detected": True, "tampering": True})
    if _fingerprint(ctx):
        raise Fail(T("your function's output is bit-for-bit torch's built-in attention "
                     "kernel's on fresh inputs (no hand-written attention rounds the same "
                     "way): write the attention yourself"),
                   {"fingerprint": "builtin", "detected": True})
    # Blocked autograd attempts (tasks that switch it off) are that task's own check, not attention.
    hits = sorted({b for b in ctx.blocked if not b.startswith("autograd:")} | set(forbidden_ops(ctx.ops)))
    if hits:
        raise Fail(T("your function called torch's built-in attention, which is switched off "
                     "while grading ({ops}); write the attention yourself", ops=", ".join(hits[:4])),
                   {"ops": hits[:20], "detected": True})
    if ctx.fingerprint_unanswered and not ctx.fingerprint_samples:
        # Both calls on the fingerprint's inputs hung or died, so the one verdict that cannot be
        # dodged by computing elsewhere (another interpreter, a server) was never reached: whether a
        # run is cut before or after it must not decide the score, so nothing is scored either way.
        raise Fail(T("not checked: your function did not answer the grader's calls on fresh inputs "
                     "(it hung, crashed or ran out of time), so whether built-in attention ran could "
                     "not be verified and nothing else is scored"), {"unverified": True})
    if not ctx.attention_seen and not any(i.startswith("output.") for i in ctx.passed):
        # Whether it ran torch's attention can only be judged on outputs that are attention; without
        # any (a crash everywhere, the weights returned, zeros) nothing else scores, whatever the draw.
        raise Fail(T("not checked: no output of your function matched attention (with or "
                     "without a known bug), so whether built-in attention ran could not be "
                     "verified and nothing else is scored"), {"unverified": True})
    return T("no built-in attention ran ({count} distinct operations traced over {calls} "
             "calls)", count=len(ctx.ops), calls=ctx.calls)
