"""Autograd is not allowed where the task is a backward by hand: the source scan and the run-time verdict.

The ban rests on torch's automatic differentiation itself, recognised by what a name resolves to
(imports and aliases followed): ``torch.autograd.*`` (forward mode included), ``torch.func`` and
functorch, ``Tensor.backward`` and ``requires_grad``, autograd's engine and dual levels reached by
their private names, torch's own backward formulas, and other automatic differentiation libraries.
A name is not evidence: a student's own class with a ``backward`` method (``self.softmax.backward(dA)``
in a NumPy layer), ``self.W.grad``, or a variable called ``grad`` are their own code. A method name
that only torch's tensors have (``.backward()``, ``.requires_grad_()``) on an object the scan cannot
resolve counts as autograd unless the file defines that name itself; the run-time block
(``sandbox/disarm.py``, the native trap) stops what the scan cannot see.
"""
from __future__ import annotations

import ast

from .. import bounded
from ..i18n import T
from ..source import parse_python
from .forbidden import FINDINGS_LIMIT, beyond_bounds

# No torch at load time (``bounded`` runs ``scan_tree`` in a small process of its own): the checks
# import ``Fail`` where they raise it.

# Modules whose members compute gradients by automatic differentiation (reverse or forward mode).
AUTOGRAD_MODULES = ("torch.autograd", "torch.func", "functorch", "torch._functorch", "torch._C._functorch")
# Members of those modules that compute no gradient: defining a Function (and calling its methods) is
# writing the backward by hand; switching recording off, profiling and vmap are not differentiation.
ALLOWED = ("torch.autograd.Function", "torch.autograd.function", "torch.autograd.no_grad",
           "torch.autograd.inference_mode", "torch.autograd.grad_mode", "torch.autograd.profiler",
           "torch.autograd.set_grad_enabled", "torch.autograd.is_grad_enabled", "torch.func.vmap",
           "torch.func.functional_call", "functorch.vmap", "torch._functorch.apis.vmap")
# Entry points outside those modules: the engine and dual levels by their private names, tensor
# methods that start or need a backward pass, the switch that turns recording back on.
ENTRY_POINTS = {"torch.Tensor.backward", "torch.Tensor.requires_grad_", "torch.Tensor.register_hook",
                "torch.Tensor.retain_grad", "torch.enable_grad", "torch._C._ImperativeEngine",
                "torch._C._EngineBase", "torch._C._enter_dual_level", "torch._C._exit_dual_level",
                "torch._make_dual", "torch._unpack_dual", "torch._VF._make_dual", "torch._VF._unpack_dual",
                "torch.ops.aten._make_dual", "torch.ops.aten._unpack_dual"}
# The last part of a resolved torch name that makes it autograd wherever it lives.
PRIVATE_PARTS = {"_execution_engine", "run_backward", "_run_backward", "_ImperativeEngine", "_EngineBase",
                 "_enter_dual_level", "_exit_dual_level", "_make_dual", "_unpack_dual", "_fw_primal"}
FORWARD_MODE = ("torch.autograd.forward_ad", "torch.func.jvp", "torch.func.jacfwd", "torch.func.linearize",
                "torch.autograd.functional.jvp", "functorch.jvp", "functorch.jacfwd", "torch._functorch")
# Other automatic differentiation libraries.
OTHER_LIBRARIES = {"jax", "autograd", "tensorflow", "tinygrad", "mxnet", "paddle"}
# Method and attribute names only torch's tensors have for autograd: on an object the scan cannot
# resolve they mean autograd, unless the file defines the name itself.
TENSOR_ONLY = {"backward", "requires_grad_", "register_hook", "retain_grad", "grad_fn", "_fw_grad",
               "requires_grad"}
# In strings that feed a dynamic lookup: fragments that name autograd whatever they are looked up on,
# and weaker ones that do when looked up on torch (or run as code).
STRONG = ("autograd", "requires_grad", "enable_grad", "grad_enabled", "engine", "vjp", "jvp", "jacrev",
          "jacfwd", "jacobian", "hessian", "dual", "functorch", "forward_ad", "grad_fn", "run_backward")
WEAK = ("grad", "backward", "func")
DYNAMIC = {"getattr", "setattr", "delattr", "hasattr", "__import__", "import_module", "eval", "exec", "compile",
           "attrgetter", "methodcaller", "__getattribute__", "vars", "globals"}
CODE = {"eval", "exec", "compile"}
# A resolved name longer than this keeps its first and last parts (what ``_is_autograd`` reads):
# torch's own names have fewer than ten, and ``a2 = a1.nn; a3 = a2.nn; …`` must not grow without end.
MAX_PARTS = 24
# aten operators that only run in automatic differentiation (the child's trace of them is a detection).
OP_FRAGMENTS = ("backward", "autograd.grad", "make_dual", "unpack_dual", "fw_primal")


def _is_autograd(name: str) -> bool:
    parts = (name or "").split(".")
    if parts[0] not in ("torch", "functorch"):
        return False
    if parts[-1] == "enable_grad" or name in ENTRY_POINTS:
        return True
    if any(name == a or name.startswith(a + ".") for a in ALLOWED):
        return False
    if any(name.startswith(m + ".") for m in AUTOGRAD_MODULES):
        return True
    return parts[-1] in PRIVATE_PARTS or parts[-1].endswith(("_backward", "_backward_data"))


def _kind(name: str) -> str:
    return " (forward-mode automatic differentiation)" if name.startswith(FORWARD_MODE) or "dual" in name else ""


class _Enough(Exception):
    """FINDINGS_LIMIT findings are in: the verdict is made."""


class _Scan:
    """One pass over a module's tree: names bound to torch, the names the file defines, findings.

    What a name stands for is worked out once per name, on demand (``_resolve_name``), with no
    recursion and no repeated passes: linear in the tree whatever order or cycles the aliases form."""

    def __init__(self, tree: ast.AST, own: set | None = None):
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        self.imports: dict[str, str] = {}
        self.assigned: dict[str, list] = {}  # name -> the values assigned to it, in source order
        self.bound: dict[str, str | None] = {}  # name -> what it stands for, once worked out
        self.own = set(own or ()) | self._own_names()
        self.findings: list[dict] = []
        self.inner = {id(n.value) for n in self.nodes if isinstance(n, ast.Attribute)}
        self._file_hit = None
        self._bind()

    def _own_names(self) -> set:
        """Functions, methods, parameters and attributes the file defines: its own, not torch's."""
        own = set()
        for n in self.nodes:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(n.name)
            elif isinstance(n, ast.arg):
                own.add(n.arg)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _root_name(n) == "self":
                own.add(n.attr)
        return own

    def _bind(self) -> None:
        for n in self.nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    self.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
                for a in n.names:
                    self.imports[a.asname or a.name] = f"{n.module}.{a.name}"
        assigns = sorted((n for n in self.nodes if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
                          and n.value is not None), key=lambda n: (n.lineno, n.col_offset))
        for n in assigns:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Name):  # an attribute or subscript target aliases nothing
                    self.assigned.setdefault(t.id, []).append(n.value)

    def _resolve_name(self, name: str) -> str | None:
        """What ``name`` stands for: its import, then each value assigned to it in source order
        (the last that resolves wins). A value that refers back to a name being worked out sees
        that name's value so far, so ``x = torch; x = x.nn`` ends as ``torch.nn`` and a cycle
        ends. An explicit stack, not recursion: a chain of 100,000 aliases in reverse order is
        one walk."""
        if name in self.bound:
            return self.bound[name]
        sofar = {name: self.imports.get(name)}
        stack = [[name, 0]]
        while stack:
            frame = stack[-1]
            current, i = frame
            values = self.assigned.get(current, ())
            if i == len(values):
                self.bound[current] = sofar.pop(current)
                stack.pop()
                continue
            (kind, root), _ = _chain(values[i])
            if kind == "name" and root not in self.bound and root not in sofar:
                sofar[root] = self.imports.get(root)
                stack.append([root, 0])
                continue
            value = self._resolve(values[i], sofar)
            if value is not None:
                sofar[current] = value
            frame[1] += 1
        return self.bound[name]

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted torch-world name an expression stands for (None when it is the file's own)."""
        return self._resolve(node, None)

    def _resolve(self, node: ast.AST, sofar: dict | None) -> str | None:
        (kind, base), attrs = _chain(node)
        if kind == "name":
            if sofar is not None and base in sofar:
                base = sofar[base]
            else:
                base = self._resolve_name(base)
        if base is None:
            return None
        parts = [*base.split("."), *reversed(attrs)]
        if len(parts) > MAX_PARTS:  # a chain of aliases, each a link longer: keep what decides
            parts = parts[:MAX_PARTS // 2] + ["…"] + parts[-(MAX_PARTS // 2 - 1):]
        return ".".join(parts)

    def flag(self, node, what) -> None:
        self.findings.append({"line": getattr(node, "lineno", 0), "what": what})
        if len(self.findings) >= FINDINGS_LIMIT:
            raise _Enough

    def run(self) -> list[dict]:
        try:
            self._walk()
        except _Enough:
            pass
        return self.findings

    def _walk(self) -> None:
        for n in self.nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.split(".")[0] in OTHER_LIBRARIES:
                        self.flag(n, f"imports {a.name}, an automatic differentiation library")
            elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
                if n.module.split(".")[0] in OTHER_LIBRARIES:
                    self.flag(n, f"imports from {n.module}, an automatic differentiation library")
                for a in n.names:
                    full = f"{n.module}.{a.name}"
                    if _is_autograd(full):
                        self.flag(n, f"imports {a.name} from {n.module}{_kind(full)}")
            elif isinstance(n, ast.Attribute) and id(n) not in self.inner:
                self._attribute(n)
            elif isinstance(n, ast.Call):
                self._call(n)

    def _attribute(self, n: ast.Attribute) -> None:
        name = self.resolve(n)
        if name and _is_autograd(name):
            self.flag(n, f"uses {name}{_kind(name)}")
            return
        if name or n.attr not in TENSOR_ONLY or n.attr in self.own:
            return
        if n.attr == "requires_grad":
            if isinstance(n.ctx, ast.Store):
                self.flag(n, "sets .requires_grad on a tensor (autograd)")
            return
        self.flag(n, f"uses .{n.attr} (autograd; your file defines no {n.attr} of its own)")

    def _call(self, n: ast.Call) -> None:
        func = self.resolve(n.func)
        for kw in n.keywords:
            if kw.arg == "requires_grad" and not _is_false(kw.value) and (
                    (func or "").startswith("torch") or (func is None and "requires_grad" not in self.own)):
                self.flag(n, "creates a tensor with requires_grad (autograd)")
        if (func or "").endswith("set_grad_enabled") and n.args and not _is_false(n.args[0]):
            self.flag(n, "switches gradient recording on (torch.set_grad_enabled)")
        called = _func_name(n)
        if called not in DYNAMIC:
            return
        if called in CODE and n.args and _const_str(n.args[0]) is not None:
            try:  # code given as a literal: scan it like the file, with the file's own names
                inner = parse_python(_const_str(n.args[0]), mode="exec")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass
            else:
                for f in _Scan(inner, self.own).run():
                    self.flag(n, f"runs code that {f['what']} ({called})")
                return
        args = n.args[1:] if called in ("getattr", "setattr", "delattr", "hasattr") else n.args
        literal = "".join(s for a in args for s in _strings(a)).lower()
        computed = any(not isinstance(a, ast.Constant) for a in args)
        receiver = self.resolve(n.args[0]) if called in ("getattr", "setattr", "delattr", "hasattr") \
            and n.args else None
        on_torch = (receiver or "").split(".")[0] in ("torch", "functorch") or called in CODE
        fragments = STRONG + (WEAK if on_torch else ())
        hit = next((f for f in fragments if f in literal), None)
        if hit is None and computed and on_torch:
            # the name is built elsewhere: every string in the file may be part of it (worked out
            # once per file, not once per lookup)
            if self._file_hit is None:
                strings = "".join(_file_strings(self.tree)).lower()
                self._file_hit = [next((f for f in fragments if f in strings), None)]
            hit = self._file_hit[0]
        if hit:
            self.flag(n, f"looks up a name containing {hit!r} dynamically ({called})")


def _chain(node) -> tuple[tuple[str, str | None], list[str]]:
    """An expression as its base and the attribute names read off it, innermost last:
    (("name", id) | ("module", dotted) | ("other", None), attrs). ``getattr(x, "a")``,
    ``sys.modules["torch"]``, ``__import__("torch")`` and ``import_module("torch.func")`` count.
    Iterative: a chain thousands deep must not exhaust the stack."""
    attrs = []
    while True:
        if isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call) and _func_name(node) == "getattr" and len(node.args) >= 2 \
                and _const_str(node.args[1]) is not None:
            attrs.append(_const_str(node.args[1]))
            node = node.args[0]
        elif isinstance(node, ast.Subscript) and _const_str(node.slice) is not None \
                and isinstance(node.value, ast.Attribute) and node.value.attr == "modules":
            return ("module", _const_str(node.slice)), attrs
        elif isinstance(node, ast.Call) and _func_name(node) in ("__import__", "import_module") \
                and node.args and _const_str(node.args[0]) is not None:
            text = _const_str(node.args[0])
            return ("module", text.split(".")[0] if _func_name(node) == "__import__" else text), attrs
        elif isinstance(node, ast.Name):
            return ("name", node.id), attrs
        else:
            return ("other", None), attrs


def _root_name(node) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _func_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")


def _const_str(node, depth: int = 0) -> str | None:
    """A string the source spells out, literally or as a sum of literals ("auto" + "grad")."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and depth < 100:
        left, right = _const_str(node.left, depth + 1), _const_str(node.right, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)
    return None


def _is_false(node) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def _strings(node) -> list[str]:
    found = sorted(((n.lineno, n.col_offset, n.value) for n in ast.walk(node)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)))  # in source order
    return [s for _, _, s in found]


def _file_strings(tree) -> list[str]:
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and _const_str(n.value) is not None}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


def scan(source: str) -> list[dict]:
    """Autograd in ``source`` as {line, what}, in source order, each once. In this process: grading
    calls ``static_check``, which scans in a limited one (``bounded.scan``)."""
    return scan_tree(parse_python(source))


def scan_tree(tree: ast.AST) -> list[dict]:
    """``scan`` on a parsed tree."""
    found = _Scan(tree).run()
    seen, unique = set(), []
    for f in sorted(found, key=lambda f: f["line"]):
        if (f["line"], f["what"]) not in seen:
            seen.add((f["line"], f["what"]))
            unique.append(f)
    return unique


def static_check(ctx):
    """``forbidden.autograd_source``: no automatic differentiation in the source."""
    from .base import Fail

    try:
        found = ctx.scanned("autograd")
    except bounded.BoundExceeded as exc:
        raise Fail(beyond_bounds(exc), {"detected": True, "bound": exc.what, "limit": exc.detail}) from None
    if found:
        lines = "; ".join(f"line {f['line']}: {f['what']}" for f in found[:5])
        raise Fail(T("autograd is not allowed in this task: compute dQ, dK and dV with your "
                     "own formulas ({lines})", lines=lines), {"findings": found[:20], "detected": True})
    return T("no autograd in the source")


def runtime_check(ctx):
    """Post phase: no blocked autograd attempt and no backward kernel in the child's trace (advisory
    evidence, but it can only incriminate; autograd itself is switched off in the child)."""
    from .base import Fail

    hits = sorted({op for op in ctx.ops if any(f in op.lower() for f in OP_FRAGMENTS)}
                  | {b.split(":", 1)[1] for b in ctx.blocked if b.startswith("autograd:")})
    if hits:
        raise Fail(T("your function ran autograd's backward ({value}): compute the gradients "
                     "with your own formulas", value=', '.join(hits[:4])), {"ops": hits[:20], "detected": True})
    return T("no backward kernel ran ({count} distinct operations traced over {calls} calls)",
             count=len(ctx.ops), calls=ctx.calls)
