"""Switch torch's own attention off inside the sandboxed child, before the student's file runs.

Loaded by path by the harness (stdlib + torch only, like ``wire.py``). Two layers:

* **Dispatcher kernels.** Every aten operator that computes attention (the fused SDPA
  kernels, the math fallback, native multi-head attention, the encoder-layer fast path)
  gets a kernel that raises, registered for the CPU and CUDA keys (or the composite key
  the operator is defined by). The dispatcher is process-wide, so this holds in every
  thread, under ``DisableTorchFunction``, through ``torch.ops`` and ``torch._C`` paths.
  The registration object is then made unreachable from Python (one reference held from
  C, none from any Python object), so the student cannot find it to undo it.
* **Python implementations.** Functions and modules in torch that compute attention in
  plain Python (``F.multi_head_attention_forward`` with ``need_weights=True``,
  ``nn.MultiheadAttention``, the ``nn.Transformer*`` layers, flex attention's math path)
  are replaced by raisers, in every torch module loaded now and in any loaded later.

Each raiser records the attempt in ``ATTEMPTS`` (the harness reports it with every
answer). That report is advisory, as everything from this process is; the block itself
is the defence, and the parent has its own check (see ``grader/checks/forbidden.py``).
"""
import ctypes
import re
import sys
import threading
import warnings

import torch

# aten operators whose name marks them as attention (matched against every registered op).
OP_PATTERN = re.compile(r"^aten::(.*(attention|sdpa|_sdp_|multi_head|transformer_encoder_layer).*"
                        r"|_masked_softmax.*|_fused_sdp_choice)$")
# Python-level names in torch modules that compute (or select) attention.
NAME_PATTERN = re.compile(r"(attention|_attn|attn_|sdpa|scaled_dot|multi_head|multihead)", re.IGNORECASE)
CLASS_NAMES = {"MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
               "TransformerEncoderLayer", "TransformerDecoderLayer"}
ROOTS = ("torch", "functorch")
# Names that merely match the pattern but compute nothing (config flags, type names).
KEEP = {"SDPBackend", "SDPAParams"}

ATTEMPTS: list = []
_LOCK = threading.Lock()
_DONE = False


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


def _block_kernels() -> int:
    lib = torch._C._dispatch_library("IMPL", "aten", "")
    count = 0
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
        for full in torch._C._dispatch_get_all_op_names():
            if not OP_PATTERN.match(full):
                continue
            op = full.split("::", 1)[1]
            if has(full, "CompositeImplicitAutograd"):
                keys = ["CompositeImplicitAutograd"]
            else:
                keys = ["CPU", "CUDA"] + [k for k in ("CompositeExplicitAutograd",) if has(full, k)]
            for key in keys:
                lib.impl(op, key, _raiser(full), False)
                count += 1
    # Keep the registration alive with a reference no Python object holds: gc cannot list it,
    # so the student cannot reach it to reset it.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(lib))
    del lib
    return count


def _block_class(cls, label: str) -> None:
    raiser = _raiser(label)

    def init(self, *args, **kwargs):
        raiser()

    cls.__init__ = init
    cls.forward = lambda self, *args, **kwargs: raiser()
    cls.__call__ = lambda self, *args, **kwargs: raiser()


def _disarm_module(module) -> None:
    name = getattr(module, "__name__", "")
    if not isinstance(name, str) or name.split(".")[0] not in ROOTS:
        return
    try:
        items = list(vars(module).items())
    except TypeError:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading deprecated attributes warns
        for attr, value in items:
            _disarm_attr(module, name, attr, value)


def _disarm_attr(module, name: str, attr: str, value) -> None:
    if attr in KEEP:
        return
    if isinstance(value, type):
        if attr in CLASS_NAMES and value.__module__.startswith("torch.nn") \
                and not getattr(value, "_attn_grader_blocked", False):
            _block_class(value, f"torch.nn.{attr}")
            value._attn_grader_blocked = True
        return
    if not (callable(value) and NAME_PATTERN.search(attr)):
        return
    owner = getattr(value, "__module__", None) or ""
    if isinstance(owner, str) and owner and owner.split(".")[0] not in ROOTS:
        return  # another package's object re-exported by torch: not torch's attention
    try:
        setattr(module, attr, _raiser(f"{name}.{attr}"))
    except (AttributeError, TypeError):
        pass


class _DisarmOnImport:
    """A meta-path hook: torch modules imported later are disarmed as soon as they finish loading."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.split(".")[0] not in ROOTS:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, _DisarmOnImport) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader:
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _disarm_module(module)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def disarm() -> int:
    """Idempotent. Returns how many kernels were switched off (0 on later calls)."""
    global _DONE
    if _DONE:
        return 0
    _DONE = True
    import torch.nn  # noqa: F401  (the modules whose names must be disarmed are loaded here)
    import torch.nn.functional  # noqa: F401
    count = _block_kernels()
    for module in list(sys.modules.values()):
        if module is not None:
            _disarm_module(module)
    for module in list(sys.modules.values()):  # importlib.reload re-runs a module through its spec's loader
        spec = getattr(module, "__spec__", None)
        if (getattr(module, "__name__", "") or "").split(".")[0] in ROOTS and spec is not None \
                and hasattr(getattr(spec, "loader", None), "exec_module") and not isinstance(spec.loader, _Loader):
            try:
                spec.loader = _Loader(spec.loader)
            except (AttributeError, TypeError):
                pass
    sys.meta_path.insert(0, _DisarmOnImport())
    return count


_AUTOGRAD_DONE = False


class _NoEngine:
    """Stands in for autograd's C++ engine: every backward pass (any entry point) raises."""

    def __getattr__(self, name):
        return _raiser(f"torch.autograd engine.{name}", autograd=True)


def block_autograd() -> None:
    """Idempotent; for tasks such as ``sdpa_backward`` whose point is computing gradients by hand.

    autograd's Python entry points (torch.autograd.grad/backward, Tensor.backward, the
    functional and torch.func transforms) are replaced by raisers, and the engine object they
    all end in is swapped for one that raises, so a backward reached another way fails too.
    Like the attention block this is the defence in depth; the parent's verdict rests on its
    own reference and on the trace of backward kernels (grader/checks/backward.py).
    """
    global _AUTOGRAD_DONE
    if _AUTOGRAD_DONE:
        return
    _AUTOGRAD_DONE = True
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
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(lib))  # alive, and held by no Python object
    del lib
    return swaps


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
