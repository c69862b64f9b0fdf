"""Take the code out of torch's own Python functions that compute attention or derivatives.

Loaded by path by ``disarm.py`` (stdlib and torch only). ``disarm`` replaces torch's attention
functions by name in the modules that define them; that cannot reach a function it has no name
for (the attention patterns ``torch._inductor`` rewrites graphs with, flex attention's dense
math), nor a function rebuilt from a blocked one's code object (``types.FunctionType(f.__code__,
...)``). This module decides by what a function's code does, and acts on the code itself:

* **The rule** (``computes_attention``): a function of torch's (its code was compiled from a file
  under torch's package directory) that takes arguments and whose code, nested functions and
  lambdas included, names a softmax or an exponential *and* a matrix product (``matmul``,
  ``bmm``, ``baddbmm``, ``mm``, ``einsum``, or the ``@`` operator) computes attention, or its
  derivative, from parts; so does a function that defines one. Of torch's 40,000 functions, the
  ones that match are ``F.multi_head_attention_forward``, quantizable multi-head attention,
  flex attention's dense forward and backward, the ``_sfdp_pattern_*`` functions of
  ``fuse_attention`` and ONNX's reference attention. Functions without parameters that only list
  both operators (operator tables) compute nothing on anyone's inputs and stay.
* **The derivative rule** (``is_derivative``, only for tasks that switch autograd off): a function
  of torch's whose own name says it differentiates (``backward``, ``_bwd``, ``vjp``, ``jvp``,
  ``jacrev``, ``jacfwd``, ``hessian``, ``linearize``), and every Python decomposition of an
  operator whose name contains ``backward`` (``torch._decomp``'s tables, whatever the function
  is called there).
* **In place.** A matching function keeps its identity (every table, decorator and bound method
  that holds it still does) but its ``__code__`` becomes a stub that raises, so a function
  rebuilt from its code object raises too. The stub carries its raiser among its constants:
  ``marshal`` cannot serialise it, and its file name is not torch's, so ``inspect`` finds no
  source for it either.

Torch modules imported later are stripped when their import finishes (``disarm``'s import
hook). What this cannot reach is torch's files: reading a ``.py`` and executing it, or loading a
``.pyc`` with ``marshal``. The zygote's children (``strict``, ``auto``) do not see torch's package
directory at all (``sealed_dirs``, hidden by ``isolate.build_root``); a plain child (``none``,
``local``) can read it.
"""
import dis
import gc
import os
import re
import sys
import types

import torch

# A function whose code names one of each computes attention (or its derivative) from parts.
SOFTMAX_NAMES = frozenset({"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax", "safe_softmax",
                           "special_softmax", "softmax_", "exp", "exp_", "logsumexp"})
PRODUCT_NAMES = frozenset({"matmul", "_matmul", "bmm", "baddbmm", "mm", "addmm", "einsum"})
DERIVATIVE_NAME = re.compile(r"backward|_bwd|vjp|jvp|jacrev|jacfwd|hessian|linearize", re.IGNORECASE)
_BINARY_OP = dis.opmap.get("BINARY_OP")
_MATMUL_ARGS = (4, 17)  # NB_MATRIX_MULTIPLY, NB_INPLACE_MATRIX_MULTIPLY (Python 3.11+)
_PLACEHOLDER = 0x5EA1ED


def package_dirs() -> list:
    """torch's package directories (torch, and functorch where it is installed)."""
    dirs = [os.path.dirname(os.path.abspath(torch.__file__))]
    functorch = sys.modules.get("functorch")
    if functorch is not None and getattr(functorch, "__file__", None):
        dirs.append(os.path.dirname(os.path.abspath(functorch.__file__)))
    else:
        sibling = os.path.join(os.path.dirname(dirs[0]), "functorch")
        if os.path.isdir(sibling):
            dirs.append(sibling)
    return dirs


PREFIXES = tuple(d + os.sep for d in package_dirs())


def sealed() -> bool:
    """Whether torch's files are hidden from this process (the zygote's children)."""
    return not os.path.exists(os.path.join(PREFIXES[0], "__init__.py"))


def _uses_matmul_operator(code) -> bool:
    if _BINARY_OP is None:  # before 3.11 the operator had its own opcode
        return "BINARY_MATRIX_MULTIPLY" in [dis.opname[b] for b in code.co_code[::2]]
    raw = code.co_code
    at = raw.find(bytes((_BINARY_OP,)))
    while at != -1:
        if at % 2 == 0 and raw[at + 1] in _MATMUL_ARGS:
            return True
        at = raw.find(bytes((_BINARY_OP,)), at + 1)
    return False


def _names(code) -> tuple:
    """(names, whether ``@`` is used) of ``code`` and every code object nested in it."""
    names, product, todo = set(), False, [code]
    while todo:
        c = todo.pop()
        names.update(c.co_names)
        product = product or _uses_matmul_operator(c)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names, product


_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def _takes_arguments(code) -> bool:
    return bool(code.co_argcount or code.co_kwonlyargcount or code.co_flags & (0x04 | 0x08)) \
        and code.co_name not in _COMPREHENSIONS  # VARARGS, VARKEYWORDS; a comprehension's one is its iterator


def computes_attention(code) -> bool:
    """The rule: a function that takes arguments and whose code (nested code objects included)
    names a softmax or an exponential and a matrix product; or that defines such a function.
    Functions without parameters that merely list both operators (tables of operators) compute
    nothing on anyone's inputs."""
    todo = [code]
    while todo:
        c = todo.pop()
        if _takes_arguments(c):
            names, product = _names(c)
            if names & SOFTMAX_NAMES and (product or names & PRODUCT_NAMES):
                return True
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return False


def is_derivative(code) -> bool:
    return bool(DERIVATIVE_NAME.search(code.co_name))


def torch_owned(func) -> bool:
    return type(func) is types.FunctionType and func.__code__.co_filename.startswith(PREFIXES)


STUBS: set = set()          # ids of the stub code objects this module made
DERIVATIVES: list = []      # torch functions the derivative rule matches, found once, stripped on demand
_TEMPLATES: dict = {}


def _template(nfree: int):
    """A stub's code with ``nfree`` free variables (a function's closure must match its code's)."""
    if nfree not in _TEMPLATES:
        names = [f"_free{i}" for i in range(nfree)]
        lines = ["def _outer():"] + [f"    {n} = None" for n in names] + ["    def stub(*args, **kwargs):"]
        lines += [f"        {n}" for n in names] + [f"        return ({_PLACEHOLDER}).__call__()", "    return stub"]
        outer = compile("\n".join(lines) + "\n", "<switched off by the grader>", "exec", dont_inherit=True)
        _TEMPLATES[nfree] = next(c for c in next(c for c in outer.co_consts if isinstance(c, types.CodeType))
                                 .co_consts if isinstance(c, types.CodeType))
    return _TEMPLATES[nfree]


def _stub(func, raiser):
    code = func.__code__
    template = _template(len(code.co_freevars))
    consts = tuple(raiser if type(c) is int and c == _PLACEHOLDER else c for c in template.co_consts)
    return template.replace(co_consts=consts, co_name=code.co_name, co_qualname=code.co_qualname,
                            co_filename="<switched off by the grader>")


def strip(func, raiser) -> bool:
    """Replace ``func``'s code by a stub that calls ``raiser()``. False where it already is one."""
    if id(func.__code__) in STUBS:
        return False
    stub = _stub(func, raiser)
    try:
        func.__code__ = stub
    except (TypeError, ValueError):
        return False
    STUBS.add(id(stub))
    return True


def _name(func) -> str:
    return f"{getattr(func, '__module__', None) or 'torch'}.{func.__qualname__}"


def strip_loaded(make_raiser, derivatives: bool = False) -> int:
    """Every torch function the collector can see: those that compute attention are stripped now;
    those the derivative rule matches are remembered (``DERIVATIVES``), and stripped too when
    ``derivatives`` is true. Returns how many were stripped."""
    count = 0
    for func in gc.get_objects():
        if not torch_owned(func) or id(func.__code__) in STUBS:
            continue
        if computes_attention(func.__code__):
            count += strip(func, make_raiser(_name(func), False))
        elif is_derivative(func.__code__):
            if derivatives:
                count += strip(func, make_raiser(_name(func), True))
            else:
                DERIVATIVES.append(func)
    return count


def strip_derivatives(make_raiser) -> int:
    """The derivative rule, for a task that switches autograd off: the functions found earlier,
    and every Python decomposition of a backward operator (named ``_fn`` and the like there)."""
    count = sum(strip(f, make_raiser(_name(f), True)) for f in DERIVATIVES)
    for table in _decomposition_tables():
        for op, func in list(table.items()):
            if "backward" in str(op):
                for inner in _unwrapped(func):
                    count += strip(inner, make_raiser(f"{op} (a decomposition)", True))
    return count


def _decomposition_tables() -> list:
    decomp = sys.modules.get("torch._decomp")
    if decomp is None:
        return []
    tables = [getattr(decomp, "decomposition_table", {})]
    tables += list(getattr(decomp, "global_decomposition_table", {}).values())
    return [t for t in tables if isinstance(t, dict)]


def _unwrapped(func) -> list:
    found = []
    while type(func) is types.FunctionType and func not in found and len(found) < 16:
        found.append(func)
        func = getattr(func, "__wrapped__", None)
    return found
