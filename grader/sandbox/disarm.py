"""Switch torch's own attention off inside the sandboxed child, before the student's file runs.

Loaded by path by the harness (stdlib + torch only, like ``wire.py``). Two layers:

* **Machine code** (``trap.py``, where it applies: x86-64 Linux). Every attention kernel of
  libtorch, under every dispatch key (vmap, nested, autocast, functionalisation, autograd,
  quantized), is overwritten with code that raises, in pages the student cannot restore:
  the sandbox's seccomp filter and identities keep them so. This is the block; nothing in the
  child's memory switches it off. Where the trap cannot be applied (another platform: a
  student's own pre-check), a raising kernel is registered with the dispatcher instead, for
  every dispatch key that has a kernel for an attention operator: the same messages, but an
  object in the child's memory, which the student could undo (and only fool their own check).
* **Python implementations.** Functions and classes in torch that compute attention in plain
  Python (``F.multi_head_attention_forward``, ``nn.MultiheadAttention`` and every class
  derived from it in torch, such as ``torch.ao.nn.quantizable.MultiheadAttention``, the
  ``nn.Transformer*`` layers, flex attention's dense path, the decompositions of the attention
  operators) are replaced by raisers, identified by what they are, in every torch module loaded
  now or later. Compilers and tools that merely *refer* to attention (``torch._dynamo``,
  ``torch._inductor``, ``torch.fx``, export, ONNX) are left alone: they compute nothing, and
  honest code needs them (``torch.compile``, ``torch.utils.checkpoint``). What this by-name
  layer cannot reach (torch's attention patterns, code rebuilt from a code object, torch's files)
  is ``seal.py``'s: code stripped by what it does, and torch's files sealed from the child.

Each raiser records the attempt in ``ATTEMPTS`` (the harness reports it with every
answer). That report is advisory, as everything from this process is; the parent has its own
check (see ``grader/checks/forbidden.py``).
"""
import importlib.util
import os
import re
import sys
import threading
import types
import warnings

import torch

# aten operators whose name marks them as attention (matched against every registered op).
OP_PATTERN = re.compile(r"^aten::(.*(attention|sdpa|_sdp_|multi_head|transformer_encoder_layer).*"
                        r"|_masked_softmax.*|_fused_sdp_choice)$")
# Python-level names that compute (or select) attention, in the modules that define them.
NAME_PATTERN = re.compile(r"(attention|_attn|attn_|sdpa|scaled_dot|multi_head|multihead)", re.IGNORECASE)
# The torch modules whose attention-named functions compute attention. Everything else in torch
# (compilers, tracers, exporters, tests) only refers to it, and must keep working.
COMPUTING_MODULES = re.compile(r"^(torch\.nn\.functional|torch\.nn\.modules(\..*)?|torch\.nn\.attention(\..*)?"
                               r"|torch\._higher_order_ops\.flex_attention|torch\._decomp(\..*)?|torch\._refs(\..*)?"
                               r"|torch\.ao\.nn(\..*)?|torch\.nn\.quantized(\..*)?|torch\.nn\.intrinsic(\..*)?"
                               r"|functorch\.experimental(\..*)?)$")
# Names that merely match the pattern but compute nothing (config flags, type names, context managers).
KEEP = {"SDPBackend", "SDPAParams", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"}

ATTEMPTS: list = []
_LOCK = threading.Lock()
_DONE = False
BLOCKED_CLASSES: list = []  # torch's attention classes; their torch-defined subclasses follow them


class BuiltinAttentionDisabled(RuntimeError):
    """Raised by every switched-off attention entry point."""


class AutogradDisabled(RuntimeError):
    """Raised by autograd's entry points in a task whose point is a hand-written backward."""


AUTOGRAD_PREFIX = "autograd:"  # how a blocked autograd attempt is told apart in ATTEMPTS


def _raiser(name: str, autograd: bool = False):
    def blocked(*args, **kwargs):
        with _LOCK:
            if len(ATTEMPTS) < 100:
                ATTEMPTS.append(AUTOGRAD_PREFIX + name if autograd else name)
        if autograd:
            raise AutogradDisabled(f"{name} is autograd, which this task switches off: compute the "
                                   f"gradients with your own formulas")
        raise BuiltinAttentionDisabled(
            f"{name} is torch's built-in attention, which is switched off while grading: "
            f"write the attention yourself (matmul, softmax, matmul)")
    blocked.__name__ = blocked.__qualname__ = ("autograd_disabled" if autograd else "builtin_attention_disabled")
    return blocked


# -- machine code -----------------------------------------------------------------------------

def _sibling(name: str, filename: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), filename))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _trap():
    return _sibling("_attn_trap", "trap.py")


def _seal():
    return _sibling("_attn_seal", "seal.py")  # torch's Python code that computes attention, stripped


NATIVE = {"problem": None}  # why the machine-code trap is not in place here (None: it is)


def trap_native(stage_autograd: bool = False) -> str | None:
    """Put the machine-code trap in place in this process (idempotent; before any student code,
    while single-threaded). A process whose children load a seccomp filter before they learn
    their task (the zygote) also stages the autograd group, which then needs no new executable
    memory to apply. Returns why the trap could not be applied, or None."""
    if "done" in NATIVE:
        return NATIVE["problem"]
    NATIVE["done"] = True
    try:
        trap = _trap()
        problem = trap.problem()
        if problem is None:
            trap.install("attention")
            if stage_autograd:
                trap.stage("autograd")
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    NATIVE["problem"] = problem
    return problem


def _register_raisers() -> int:
    """The fallback where the trap is not in place: a raising kernel for every dispatch key that
    has a kernel for an attention operator (or the composite key it is defined by)."""
    lib = torch._C._dispatch_library("IMPL", "aten", "")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    keys = [k for k in torch._C.DispatchKey.__members__ if not k.startswith(("Undefined", "Catch", "EndOf",
                                                                            "StartOf", "Python"))]
    count = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
        for full in torch._C._dispatch_get_all_op_names():
            if not OP_PATTERN.match(full):
                continue
            op = full.split("::", 1)[1]
            for key in keys:
                if has(full, key):
                    try:
                        lib.impl(op, key, _raiser(full), False)
                        count += 1
                    except RuntimeError:
                        pass  # a key that takes no Python kernel
    _KEEP_ALIVE.append(lib)
    return count


_KEEP_ALIVE: list = []


# -- Python implementations -----------------------------------------------------------------

def _block_class(cls) -> None:
    """Every method the class itself defines raises, construction included: what a subclass
    inherits from it raises too, and a subclass torch defines is blocked the same way."""
    if cls.__dict__.get("_attn_grader_blocked"):
        return
    raiser = _raiser(f"{cls.__module__}.{cls.__qualname__}")

    def method(self, *args, **kwargs):
        raiser()

    for attr, value in list(vars(cls).items()):
        # Functions only: static and class methods are utilities (nn.Transformer's
        # generate_square_subsequent_mask builds a causal mask, which honest code may use).
        if isinstance(value, type(_block_class)) and attr not in ("__new__", "__getattr__", "__setattr__",
                                                                  "__delattr__", "__repr__", "__dir__"):
            try:
                setattr(cls, attr, method)
            except (AttributeError, TypeError):
                pass
    cls.__init__ = method
    cls.forward = method
    cls.__call__ = method
    cls._attn_grader_blocked = True


def _torch_owned(obj) -> bool:
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] in ("torch", "functorch")


def _disarm_module(module) -> None:
    name = getattr(module, "__name__", "")
    if not isinstance(name, str) or name.split(".")[0] not in ("torch", "functorch"):
        return
    try:
        items = list(vars(module).items())
    except TypeError:
        return
    computing = bool(COMPUTING_MODULES.match(name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading deprecated attributes warns
        for attr, value in items:
            if isinstance(value, type):
                if _torch_owned(value) and _derives_from_blocked(value):
                    _block_class(value)
            elif computing and attr not in KEEP and NAME_PATTERN.search(attr):
                _disarm_function(module, name, attr, value)


def _disarm_function(module, name: str, attr: str, value) -> None:
    """A function is replaced in its module. An operator object (flex attention's
    HigherOrderOperator) stays, since other modules register it by identity, and its class's
    ``__call__`` raises instead. Operator packets (``torch.ops.aten.*``) reach the kernels,
    which the machine-code trap (or the dispatcher's raisers) already blocks."""
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        if _torch_owned(value) or getattr(value, "__module__", None) is None:
            try:
                setattr(module, attr, _raiser(f"{name}.{attr}"))
            except (AttributeError, TypeError):
                pass
    elif isinstance(value, torch._ops.HigherOrderOperator) and type(value) is not torch._ops.HigherOrderOperator \
            and _torch_owned(type(value)) and not type(value).__dict__.get("_attn_grader_blocked"):
        raiser = _raiser(f"{name}.{attr}")
        type(value).__call__ = lambda self, *args, **kwargs: raiser()
        type(value)._attn_grader_blocked = True


def _derives_from_blocked(cls) -> bool:
    try:
        return any(issubclass(cls, blocked) for blocked in BLOCKED_CLASSES)
    except TypeError:  # a class whose __subclasscheck__ refuses the question
        return False


class _DisarmOnImport:
    """A meta-path hook: torch modules imported later are disarmed as soon as they finish loading."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.split(".")[0] not in ("torch", "functorch"):
            return None
        for finder in sys.meta_path:
            if isinstance(finder, _DisarmOnImport) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        if _seal().sealed():
            raise ModuleNotFoundError(SEALED_MESSAGE.format(fullname), name=fullname)
        return None


SEALED_MESSAGE = ("{} is not available while grading: the sandbox offers the torch modules it loaded before "
                  "your file (torch, torch.nn, torch.nn.functional and what they import), and torch's files "
                  "cannot be read")
_IMPORTING = [0]  # how deep in torch imports this thread is (stripping waits for the outermost)


class _Loader:
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        _IMPORTING[0] += 1
        try:
            self.inner.exec_module(module)
        except OSError as exc:  # the path finder's cached listing of a directory sealed since
            if _seal().sealed():
                raise ModuleNotFoundError(SEALED_MESSAGE.format(module.__name__), name=module.__name__) from exc
            raise
        finally:
            _IMPORTING[0] -= 1
        _disarm_module(module)
        if _IMPORTING[0] == 0:  # what the import defined, nested modules and tables included
            _seal().strip_loaded(_raiser, derivatives=_AUTOGRAD_DONE)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _all_subclasses(cls) -> list:
    found, todo = [], [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                todo.append(sub)
    return found


def disarm(stage_autograd: bool = False) -> int:
    """Idempotent. Returns how many dispatcher kernels were replaced by raisers (0 where the
    machine-code trap is in place, and on later calls). ``stage_autograd``: see :func:`trap_native`."""
    global _DONE
    if _DONE:
        return 0
    _DONE = True
    import torch.nn  # noqa: F401  (the modules whose names must be disarmed are loaded here)
    import torch.nn.functional  # noqa: F401
    count = _register_raisers() if trap_native(stage_autograd) is not None else 0
    if stage_autograd:
        backward_kernels()  # looked up once here, registered in the children that block autograd
    nn = torch.nn
    BLOCKED_CLASSES.extend([nn.MultiheadAttention, nn.Transformer, nn.TransformerEncoder, nn.TransformerDecoder,
                            nn.TransformerEncoderLayer, nn.TransformerDecoderLayer])
    for cls in list(BLOCKED_CLASSES):
        for sub in [cls] + _all_subclasses(cls):
            if _torch_owned(sub):
                _block_class(sub)
    for module in list(sys.modules.values()):
        if module is not None:
            _disarm_module(module)
    for module in list(sys.modules.values()):  # importlib.reload re-runs a module through its spec's loader
        spec = getattr(module, "__spec__", None)
        if (getattr(module, "__name__", "") or "").split(".")[0] in ("torch", "functorch") and spec is not None \
                and hasattr(getattr(spec, "loader", None), "exec_module") and not isinstance(spec.loader, _Loader):
            try:
                spec.loader = _Loader(spec.loader)
            except (AttributeError, TypeError):
                pass
    _seal().strip_loaded(_raiser)  # by what their code does, wherever they are bound
    sys.meta_path.insert(0, _DisarmOnImport())
    return count


_AUTOGRAD_DONE = False


class _NoEngine:
    """Stands in for autograd's C++ engine: every backward pass (any entry point) raises."""

    def __getattr__(self, name):
        return _raiser(f"torch.autograd engine.{name}", autograd=True)


def block_autograd() -> None:
    """Idempotent; for tasks such as ``sdpa_backward`` whose point is computing gradients by hand.

    The machine-code trap's ``autograd`` group is put in place (moved in where the zygote staged
    it, patched in place where no filter is loaded): torch's engine, its per-operator backward formulas and forward-mode AD raise, however
    they are reached. On top of it, for clear messages and the advisory record, autograd's Python
    entry points (torch.autograd.grad/backward, Tensor.backward, the functional and torch.func
    transforms) are replaced by raisers and the engine object they end in is swapped for one that
    raises. The parent's verdict rests on its own reference and on the trace of backward kernels
    (grader/tasks/sdpa_backward/checks.py).
    """
    global _AUTOGRAD_DONE
    if _AUTOGRAD_DONE:
        return
    _AUTOGRAD_DONE = True
    if NATIVE.get("problem") is None and "done" in NATIVE:
        trap = _trap()
        if not trap.apply_staged("autograd"):
            trap.install("autograd")  # no filter here (the pre-check's levels): patch in place
    import torch.autograd.functional
    import torch.autograd.variable
    import torch.func
    targets = [(torch.autograd, "grad"), (torch.autograd, "backward"), (torch.Tensor, "backward")]
    targets += [(torch.autograd.functional, n) for n in ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp")]
    targets += [(torch.func, n) for n in ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
                                          "linearize")]
    swaps = {}
    for owner, attr in targets:
        if hasattr(owner, attr):
            blocked = _raiser(f"{getattr(owner, '__name__', 'torch')}.{attr}", autograd=True)
            swaps[id(getattr(owner, attr))] = blocked
            setattr(owner, attr, blocked)
    torch.autograd.variable.Variable._execution_engine = _NoEngine()
    _seal().strip_derivatives(_raiser)  # torch's Python derivatives (decompositions, flex attention's)
    _register_backward_raisers()
    swaps.update(_block_forward_mode())
    _replace_everywhere(swaps)  # the other names torch binds them to (torch._functorch's, functorch's)


# Forward-mode AD: one batched forward with one-hot tangents gives the whole Jacobian, so it is
# autograd too. Every route makes a dual tensor (aten::_make_dual) inside a dual level.
FORWARD_AD = ("dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual")


def _block_forward_mode() -> dict:
    """Dual levels and dual tensors raise: ``torch.autograd.forward_ad``, ``torch.func.jvp``/``jacfwd``
    and ``torch.autograd.functional`` in forward mode all end there. Returns {id(original): raiser}."""
    import torch._functorch.predispatch as predispatch
    import torch.autograd.forward_ad as forward_ad
    entry = {getattr(forward_ad, n): f"torch.autograd.forward_ad.{n}" for n in FORWARD_AD}
    entry.update({getattr(torch._C, n): f"torch._C.{n}" for n in ("_enter_dual_level", "_exit_dual_level")})
    entry.update({getattr(predispatch, n): f"torch._functorch.predispatch.{n}"
                  for n in ("_enter_dual_level", "_exit_dual_level", "_make_dual", "_unpack_dual")
                  if hasattr(predispatch, n)})
    swaps = {id(original): _raiser(f"{name} (forward-mode autograd)", autograd=True)
             for original, name in entry.items()}
    # Below Python: every kernel of aten::_make_dual raises, however it is reached (torch._VF,
    # torch.ops.aten, a dual level entered by hand), so no tensor can carry a tangent.
    lib = torch._C._dispatch_library("IMPL", "aten", "")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
        for key in ("CompositeExplicitAutograd", "CompositeImplicitAutograd", "Autograd", "ADInplaceOrView",
                    "Functionalize", "CPU", "CUDA"):
            if has("aten::_make_dual", key):
                lib.impl("_make_dual", key, _raiser("aten::_make_dual (forward-mode autograd)", autograd=True),
                         False)
    _KEEP_ALIVE.append(lib)  # as the attention fallback's registration (the trap is the boundary)
    return swaps


BACKWARD_KERNELS: list = []  # (operator, dispatch key) of every kernel of an aten::*backward* operator


def backward_kernels() -> list:
    """Every registered kernel of an aten operator whose name says it is a derivative
    (``_softmax_backward_data``, ``threshold_backward``...): about a thousand, a second to find."""
    if not BACKWARD_KERNELS:
        has = torch._C._dispatch_has_kernel_for_dispatch_key
        keys = [k for k in torch._C.DispatchKey.__members__
                if not k.startswith(("Undefined", "Catch", "EndOf", "StartOf", "Python"))]
        for full in torch._C._dispatch_get_all_op_names():
            if full.startswith("aten::") and "backward" in full:
                for key in keys:
                    try:
                        if has(full, key):
                            BACKWARD_KERNELS.append((full, key))
                    except RuntimeError:  # a key this build cannot name
                        pass
    return BACKWARD_KERNELS


def _register_backward_raisers() -> None:
    """A raising kernel for each of them, so that calling one (``torch._softmax_backward_data``,
    ``torch.ops.aten.*``) says why and is recorded. The trap's ``autograd`` group is what stops
    them in machine code; this registration is an object in the child's memory."""
    lib = torch._C._dispatch_library("IMPL", "aten", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
        for full, key in backward_kernels():
            try:
                lib.impl(full.split("::", 1)[1], key, _raiser(full + " (a derivative)", autograd=True), False)
            except RuntimeError:
                pass  # a key that takes no Python kernel
    _KEEP_ALIVE.append(lib)


# Where torch binds autograd's entry points under other names (torch.func's come from torch._functorch).
AUTOGRAD_HOMES = re.compile(r"^(torch|torch\._C|(torch\.autograd|torch\.func|torch\._functorch|functorch)(\..*)?)$")


def _replace_everywhere(swaps: dict) -> None:
    """Every name an autograd module of torch binds to an original in ``swaps`` (by id) now binds
    to its raiser."""
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", None)
        if not isinstance(name, str) or not AUTOGRAD_HOMES.match(name):
            continue
        try:
            found = [(attr, swaps[id(value)]) for attr, value in vars(module).items() if id(value) in swaps]
        except TypeError:
            continue
        for attr, blocked in found:
            try:
                setattr(module, attr, blocked)
            except (AttributeError, TypeError):
                pass
