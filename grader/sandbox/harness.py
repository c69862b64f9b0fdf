"""The child side: imports one student file and answers the grader's requests.

Runs inside the sandbox as a script (never as part of the ``grader`` package, which
the student must not be able to import). Requests arrive on fd 3 and answers leave on
fd 4 as wire frames; the student's own prints go to stdout/stderr, which the parent
captures and caps, so nothing the student prints can pass for a result.

Everything in this process is untrusted once the student file is imported: the
parent compares results against its own reference and never trusts a verdict from
here. Before the student's file runs, ``disarm`` switches torch's own attention off
(the defence); the operator trace and the list of blocked attempts sent with each
answer are aids to diagnosis, not a security boundary.
"""
import importlib.util
import inspect
import os
import sys
import time
import traceback

REQUEST_FD, RESPONSE_FD = 3, 4
HERE = os.path.dirname(os.path.abspath(__file__))


def _load_sibling(name: str, filename: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


import torch  # noqa: E402  (after the path-only wire loader on purpose)
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

wire = _load_sibling("_attn_wire", "wire.py")
disarm = _load_sibling("_attn_disarm", "disarm.py")
streams = _load_sibling("_attn_streams", "streams.py")  # keys made block by block (tiled_attention)
STATE = {"fn": None, "path": None, "sources": {}}
# The grader's own packages, and libraries that ship ready-made attention, are not for submissions.
BLOCKED = ("reference_impl", "grader", "flash_attn", "xformers", "transformers", "x_transformers", "timm")


class _BlockedImports:
    """A meta-path finder that refuses the grader's packages (the static scan names the attempt)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not available to submissions")
        return None


class OpRecorder(TorchFunctionMode):
    """Records the torch functions (Python API level) and aten ops a call runs."""

    def __init__(self, names):
        super().__init__()
        self.names = names

    def __torch_function__(self, func, types, args=(), kwargs=None):
        module = getattr(func, "__module__", None) or "Tensor"
        if module != "submission":  # the student's own functions dispatch here too; names are not evidence
            self.names.add(module + "." + getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class AtenRecorder(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls):
        # torch would wrap __torch_dispatch__ in torch._dynamo.disable, and its first call
        # imports torch._dynamo: 0.5-0.8 s in every fresh process (each zygote, each
        # pre-check). Nothing here is compiled; without the wrapper the recorder is the same.
        return False

    def __init__(self, names):
        super().__init__()
        self.names = names

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add("aten." + func._schema.name.split("::")[-1])
        return func(*args, **(kwargs or {}))


def _student_traceback(exc: BaseException) -> str:
    """Only the student's own frames, so a message never shows harness internals."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == STATE["path"]]
    lines = traceback.format_list(frames) if frames else []
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)[-8000:]


def _error(stage: str, exc: BaseException) -> dict:
    message = str(exc)[:2000]
    if isinstance(exc, SystemExit):
        message = f"the submission called sys.exit({exc.code!r}) instead of returning a result"
    elif not message:
        message = f"{type(exc).__name__} raised without a message"
    return {"ok": False, "stage": stage, "error": {
        "type": type(exc).__name__, "message": message, "traceback": _student_traceback(exc)}}


def receive_files(req: dict) -> dict:
    """A pre-warmed worker gets its submission over the pipe (its /sub was sealed before it arrived)."""
    for path, data in req["files"].items():
        STATE["sources"][path] = bytes(data.numpy()) if isinstance(data, torch.Tensor) else data.encode()
    return {"ok": True}


def _import_source(path: str, source: bytes):
    """Run the submission as the parent scanned it: its bytes decoded as UTF-8 (a leading
    byte-order mark dropped) and compiled as text. Compiling the bytes would honour a coding
    cookie (``# coding: utf-7`` turns one comment line into code the parent never saw)."""
    import linecache
    text = source.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    spec = importlib.util.spec_from_loader("submission", loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    sys.modules["submission"] = module
    code = compile(text, path, "exec", dont_inherit=True)  # str: any coding cookie is ignored
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)  # tracebacks show lines
    exec(code, module.__dict__)
    return module


def _seed_randomness() -> None:
    import random
    random.seed(0)
    torch.manual_seed(0)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(0)


def _compile_without_a_compiler() -> None:
    """``torch.compile`` with its default backend builds C++ with a compiler and loads the result:
    the sandbox has neither (no programs, no new executable memory). Compiled code computes what
    eager code does, so honest code that compiles its function runs it through TorchDynamo's
    ``eager`` backend instead (traced, not compiled) and gets the same values."""
    original = torch.compile

    def compile(model=None, *, backend="inductor", mode=None, options=None, **kwargs):
        if backend == "inductor":
            backend, mode, options = "eager", None, None
        return original(model, backend=backend, mode=mode, options=options, **kwargs)

    compile.__doc__, compile.__wrapped__ = original.__doc__, original
    torch.compile = compile


def _lean_allocator() -> None:
    """glibc keeps freed memory for later (its mmap threshold rises to the largest block freed, up
    to 32 MiB, and a heap is trimmed only from its top): a loop over 16 MiB blocks was measured at
    295 MiB. A fixed threshold hands every block of 256 KiB or more back to the kernel on free."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 256 << 10)  # M_MMAP_THRESHOLD (fixed: no dynamic growth)
        libc.mallopt(-1, 256 << 10)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass  # not glibc: its own policy stands


def load(req: dict) -> dict:
    STATE["path"] = req["path"]
    disarm.disarm()  # before any student code: torch's own attention raises from here on
    _seed_randomness()  # code that draws random numbers (dropout left on) draws the same ones in every child
    if req.get("lean_allocator"):  # a child whose memory is measured (session.fresh_call)
        _lean_allocator()
    if "autograd" in (req.get("block") or ()):  # the task is a hand-written backward
        disarm.block_autograd()
    if not hasattr(torch.compile, "__wrapped__"):
        _compile_without_a_compiler()
    if not any(isinstance(f, _BlockedImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _BlockedImports())
    import linecache
    linecache.clearcache()  # source lines of torch's files read before the seal (warnings, tracebacks)
    try:
        source = STATE["sources"].get(req["path"])
        if source is None:
            with open(req["path"], "rb") as f:
                source = f.read()
        module = _import_source(req["path"], source)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the student raised them
        return _error("import", exc)
    fn = getattr(module, req["function"], None)
    if fn is None:
        names = sorted(n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n]))
        return {"ok": False, "stage": "missing", "error": {
            "type": "MissingFunction", "message": f"no function named {req['function']!r}",
            "traceback": "", "defined": names[:20]}}
    if not callable(fn):
        return {"ok": False, "stage": "missing", "error": {
            "type": "NotCallable", "message": f"{req['function']!r} is a {type(fn).__name__}, not a function",
            "traceback": ""}}
    try:
        params = [{"name": p.name, "kind": p.kind.name, "has_default": p.default is not p.empty,
                   "default": repr(p.default)[:80] if p.default is not p.empty else None}
                  for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        params = None
    STATE["fn"] = fn
    return {"ok": True, "params": params}


MAX_OUTPUTS = 8  # tensors in a tuple output (the parent refuses more)


def _tensors_in(args, kwargs):
    items = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    return [(name, t) for name, t in items if isinstance(t, torch.Tensor) and not isinstance(t, streams.Streamed)]


def call(req: dict) -> dict:
    device = torch.device(req.get("device", "cpu"))
    move = lambda x: x.to(device) if isinstance(x, torch.Tensor) else streams.receive(x)
    args = [move(a) for a in req.get("args", [])]
    kwargs = {k: move(v) for k, v in req.get("kwargs", {}).items()}
    wrt = req.get("wrt") or []
    for i in wrt:
        args[i] = args[i].detach().clone().requires_grad_(True)

    torch_fns, aten_ops = set(), set()
    trace = bool(req.get("trace"))
    start = time.perf_counter()
    try:
        if trace:
            with OpRecorder(torch_fns), AtenRecorder(aten_ops):
                out = STATE["fn"](*args, **kwargs)
        else:
            out = STATE["fn"](*args, **kwargs)
        if device.type == "cuda":  # kernels run asynchronously: time them, not their launch
            torch.cuda.synchronize(device)
    except BaseException as exc:
        return _error("call", exc)
    elapsed = time.perf_counter() - start

    resp = {"ok": True, "elapsed": elapsed, "output_type": type(out).__module__ + "." + type(out).__qualname__}
    if isinstance(out, torch.Tensor):
        resp["output"] = out.detach().as_subclass(torch.Tensor)
        resp["output_device"] = str(out.device)
        resp["requires_grad"] = bool(out.requires_grad)
    elif (req.get("outputs", 1) > 1 and isinstance(out, (tuple, list)) and 0 < len(out) <= MAX_OUTPUTS
          and all(isinstance(t, torch.Tensor) for t in out)):
        # A task whose function returns several tensors (e.g. dQ, dK, dV): sent as a list.
        resp["output"] = [t.detach().as_subclass(torch.Tensor) for t in out]
        resp["output_device"] = str(out[0].device)
        resp["requires_grad"] = any(t.requires_grad for t in out)
    if req.get("echo"):  # the inputs as they are after the call: the parent compares them itself
        resp["inputs_after"] = [t.detach().as_subclass(torch.Tensor) for _, t in _tensors_in(args, kwargs)]

    grad_output = req.get("grad_output")
    if wrt and isinstance(out, torch.Tensor):
        if not out.requires_grad:
            resp["grads"] = None
            resp["grad_error"] = "the output is not connected to the inputs' autograd graph"
        else:
            try:
                with (AtenRecorder(aten_ops) if trace else _Null()):
                    grads = torch.autograd.grad(out, [args[i] for i in wrt], move(grad_output),
                                                allow_unused=True)
                resp["grads"] = [None if g is None else g.detach() for g in grads]
            except BaseException as exc:
                resp["grads"] = None
                resp["grad_error"] = _error("backward", exc)["error"]
    if trace:
        # The packages' roots are enough (importing a.b loads a first), and looking them up is
        # free, where a pass over sys.modules (1,700 entries under torch) cost a millisecond a call.
        loaded = {"module." + m for m in BLOCKED if m in sys.modules}
        resp["ops"] = sorted(torch_fns | aten_ops | loaded)[:2000]
    return resp


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def warm_up() -> None:
    """Run the harness path once so lazy imports (sympy under backward) happen before the clock starts."""
    q = torch.randn(2, 3, 4, requires_grad=True)
    names = set()
    with OpRecorder(names), AtenRecorder(names):
        out = torch.softmax(q @ q.transpose(-2, -1), dim=-1) @ q
        torch.autograd.grad(out, [q], torch.ones_like(out))
    if "numpy" in sys.modules:  # torch imported it; every load seeds its generator
        import numpy.random  # noqa: F401  (imported in each child, it cost each submission 6-40 ms)


def prepare_device(device: str) -> None:
    """Before the submission arrives (pre-warmed workers): initialise the accelerator, and run
    the harness path once in this process, so that the submission's first calls do not pay for
    what the fork left cold (copied-on-write pages, torch's first-call caches). ``load`` reseeds
    every generator, so nothing of this run is visible to the submission."""
    if device.startswith("cuda"):
        torch.cuda.init()
        torch.empty(1, device=device).add_(1)
        torch.cuda.synchronize(device)
    warm_up()


def serve() -> None:
    """Answer requests until the parent says exit or closes the channel; never returns."""
    handlers = {"load": load, "call": call, "files": receive_files}
    answering = os.getpid()
    while True:
        try:
            req = wire.read_message(REQUEST_FD)
        except Exception:
            os._exit(0)  # parent closed the channel
        op = req.get("op")
        if op == "exit":
            break
        try:
            resp = handlers[op](req)
        except BaseException as exc:  # a harness-level failure, e.g. bad request
            resp = _error("harness", exc)
        if os.getpid() != answering:
            # A process the student's code forked, back in the harness (its fork returned here, or
            # raised: os.setsid() is ENOSYS under seccomp). Only the process that read the request
            # answers it: two answers would race, and which came first would depend on the load.
            os._exit(0)
        resp["blocked"] = list(disarm.ATTEMPTS[:20])  # built-in attention tried, in any thread
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass  # the student closed or broke its own streams: its loss, not the protocol's
        try:
            wire.write_message(RESPONSE_FD, resp)
        except Exception as exc:  # e.g. a student tensor of an unsupported dtype
            wire.write_message(RESPONSE_FD, _error("transfer", exc))
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    # os._exit: student threads must not keep the process alive.
    os._exit(0)


def _apply_rlimits(limits: dict) -> None:
    """The plain-subprocess levels: ``policy.rlimits(...)`` applied by the harness itself, before
    any student code."""
    import resource
    names = _policy().RLIMIT_NAMES
    for key, value in limits.items():
        if value is None or (key == "nproc" and os.getuid() == 0):
            continue  # nproc is per uid and not enforced for root: it would only cap the grader's user
        try:
            resource.setrlimit(getattr(resource, names[key]), (value, value))
        except (ValueError, OSError):
            pass  # e.g. a hard limit already lower than ours


def _policy():
    if "_attn_policy" not in sys.modules:  # the name isolate.py shares it under
        spec = importlib.util.spec_from_file_location("_attn_policy", os.path.join(HERE, "policy.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["_attn_policy"] = module  # dataclasses looks its module up while it executes
        spec.loader.exec_module(module)
    return sys.modules["_attn_policy"]


def main() -> None:
    """Plain-subprocess entry: ``harness.py REQUEST_FD RESPONSE_FD [RLIMITS_JSON]``."""
    global REQUEST_FD, RESPONSE_FD
    if len(sys.argv) >= 3:
        REQUEST_FD, RESPONSE_FD = int(sys.argv[1]), int(sys.argv[2])
    if len(sys.argv) >= 4:
        import json
        _apply_rlimits(json.loads(sys.argv[3]))
    # One thread, as policy.child_env(device) (this process's whole environment) tells the
    # thread pools; the zygote's and local backend's children set theirs from their request.
    torch.set_num_threads(1)
    warm_up()
    disarm.disarm()  # before the first request: the trap must be in place while this process is single-threaded
    serve()


if __name__ == "__main__":
    main()
