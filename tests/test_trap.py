"""The machine-code trap (grader/sandbox/trap.py): torch's built-in attention cannot run in a sandboxed
child, whatever the child undoes, and honest code runs as before."""
import errno
import glob
import json
import os
import subprocess
import sys

import pytest
import torch

from grader.grading import grade_source
from grader.sandbox import Limits, SandboxSession, wall

HERE = os.path.dirname(os.path.abspath(__file__))
TRAP = os.path.join(os.path.dirname(HERE), "grader", "sandbox", "trap.py")
STRICT_PROBLEMS = wall.strict_problems()
LIMITS = Limits(cpu_seconds=60, wall_seconds=90, call_seconds=60, load_seconds=60, memory_bytes=4 << 30)

# Run in a fresh interpreter: the trap cannot be taken back, and this process needs torch's attention.
TRAPPED_PROCESS = r'''
import importlib.util, json, sys, threading
import torch, torch.nn.functional as F
spec = importlib.util.spec_from_file_location("_attn_trap", sys.argv[1])
trap = importlib.util.module_from_spec(spec); spec.loader.exec_module(trap)
trap.install("attention"); trap.stage("autograd")
q = torch.randn(2, 3, 5, 8)
x = torch.randn(2, 5, 8)

def outcome(fn):
    try:
        fn()
        return "ran"
    except RuntimeError as exc:
        return str(exc).splitlines()[0]

def honest(a):
    return torch.softmax(a @ a.transpose(-2, -1) / 8 ** 0.5, dim=-1) @ a

def backward():
    a = q.clone().requires_grad_()
    honest(a).sum().backward()
    return a.grad

def forward_ad():
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        return fwAD.unpack_dual(honest(fwAD.make_dual(q, torch.ones_like(q)))).tangent

def checkpointed():
    from torch.utils.checkpoint import checkpoint
    a = q.clone().requires_grad_()
    checkpoint(honest, a, use_reentrant=False).sum().backward()

in_thread = []
t = threading.Thread(target=lambda: in_thread.append(outcome(lambda: F.scaled_dot_product_attention(q, q, q))))
t.start(); t.join()
result = {"attention": {
    "sdpa": outcome(lambda: F.scaled_dot_product_attention(q, q, q)),
    "sdpa float64": outcome(lambda: F.scaled_dot_product_attention(q.double(), q.double(), q.double())),
    "math": outcome(lambda: torch.ops.aten._scaled_dot_product_attention_math(q, q, q)),
    "flash": outcome(lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)),
    "vmap": outcome(lambda: torch.vmap(lambda a: F.scaled_dot_product_attention(a, a, a))(q)),
    "autocast": outcome(lambda: torch.autocast("cpu")(lambda: F.scaled_dot_product_attention(q, q, q))()),
    "functionalize": outcome(lambda: torch.func.functionalize(lambda a: F.scaled_dot_product_attention(a, a, a))(q)),
    "native mha": outcome(lambda: torch._native_multi_head_attention(
        x, x, x, 8, 2, torch.randn(24, 8), torch.randn(24), torch.randn(8, 8), torch.randn(8))),
    "masked softmax": outcome(lambda: torch._masked_softmax(x, torch.zeros(2, 5, 8, dtype=torch.bool))),
    "thread": in_thread[0]},
  "honest": {
    "attention by hand": outcome(lambda: honest(q)),
    "backward": outcome(backward),
    "forward AD": outcome(forward_ad),
    "checkpoint": outcome(checkpointed),
    "compile (eager)": outcome(lambda: torch.compile(honest, backend="eager")(q)),
    "causal mask helper": outcome(lambda: torch.nn.Transformer.generate_square_subsequent_mask(5))}}
trap.apply_staged("autograd")
a = q.clone().requires_grad_()
result["autograd"] = {
    "backward": outcome(lambda: honest(a).sum().backward()),
    "autograd.grad": outcome(lambda: torch.autograd.grad(honest(a).sum(), [a])),
    "grad_fn by hand": outcome(lambda: honest(a).sum().grad_fn(torch.ones(()))),
    "forward AD": outcome(forward_ad),
    "func.grad": outcome(lambda: torch.func.grad(lambda b: honest(b).sum())(q)),
    "func.jvp": outcome(lambda: torch.func.jvp(honest, (q,), (torch.ones_like(q),))),
    "func.jacrev": outcome(lambda: torch.func.jacrev(lambda b: honest(b).sum())(q)),
    "forward with requires_grad": outcome(lambda: honest(a))}
print(json.dumps(result))
'''


@pytest.fixture(scope="module")
def trapped():
    from grader.sandbox import trap
    if trap.problem() is not None:
        pytest.skip(trap.problem())
    proc = subprocess.run([sys.executable, "-c", TRAPPED_PROCESS, TRAP], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_attention_kernel_raises_under_every_dispatch_key_and_thread(trapped):
    for route, outcome in trapped["attention"].items():
        assert outcome.startswith("torch's built-in attention is switched off"), (route, outcome)


def test_honest_code_runs_in_a_trapped_process(trapped):
    assert set(trapped["honest"].values()) == {"ran"}, trapped["honest"]


def test_the_autograd_group_stops_every_route_to_a_gradient_but_not_the_forward(trapped):
    routes = dict(trapped["autograd"])
    assert routes.pop("forward with requires_grad") == "ran"
    for route, outcome in routes.items():
        assert outcome.startswith("autograd is switched off"), (route, outcome)


KERNEL_RULES = r'''
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

def _errno(ok):
    return 0 if ok else ctypes.get_errno()

def probe(q):
    page = libc.mmap(None, 4096, 3, 0x22, -1, 0)            # read-write, anonymous: allowed
    found = {"rw": 0 if page not in (None, ctypes.c_void_p(-1).value) else ctypes.get_errno(),
             "rwx": _errno(libc.mmap(None, 4096, 7, 0x22, -1, 0) not in (None, ctypes.c_void_p(-1).value)),
             "mprotect_x": _errno(libc.mprotect(page, 4096, 5) == 0),
             "dumpable": _errno(libc.prctl(4, 1, 0, 0, 0) == 0)}
    try:
        open("/proc/self/mem", "r+b").close()
        found["proc_mem"] = 0
    except PermissionError:
        found["proc_mem"] = errno.EACCES
    print(found)
    return q
'''


@pytest.mark.skipif(bool(STRICT_PROBLEMS), reason="strict sandbox unavailable: " + "; ".join(STRICT_PROBLEMS))
def test_the_child_can_neither_make_memory_executable_nor_write_its_code_through_proc():
    with SandboxSession(KERNEL_RULES, "probe", level="strict", limits=LIMITS) as session:
        assert session.call(torch.zeros(1)).ok, session.stderr[-2000:]
        found = eval(session.stdout.strip().splitlines()[-1])  # our own probe's dict of ints
    assert found == {"rw": 0, "rwx": errno.EPERM, "mprotect_x": errno.EPERM, "dumpable": errno.EPERM,
                     "proc_mem": errno.EACCES}, found


# A child that undoes everything it can reach (tests/integrity/restore_kernel_code.py: every
# registration object, found through gc and by scanning its own memory; the import hooks; then each
# way of putting torch's original code back), then tries every route to an attention kernel.
with open(os.path.join(HERE, "integrity", "restore_kernel_code.py"), encoding="utf-8") as f:
    UNDO_EVERYTHING = f.read() + r'''

def probe(q):
    import torch.nn.functional as F
    sdpa = getattr(torch._C._nn, "scaled_dot_product_attention")
    x = q[0]
    E = x.size(-1)
    routes = {
        "sdpa": lambda: sdpa(q, q, q),
        "sdpa float64 (cast up and back)": lambda: sdpa(q.double(), q.double(), q.double()).float(),
        "math": lambda: torch.ops.aten._scaled_dot_product_attention_math(q, q, q)[0],
        "flash": lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)[0],
        "flash backward": lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            q, q, q, q, q, q[..., 0], 0.0, False)[0],
        "fused choice": lambda: torch.ops.aten._fused_sdp_choice(q, q, q),
        "native mha": lambda: torch._native_multi_head_attention(
            x, x, x, E, 2, torch.randn(3 * E, E), torch.randn(3 * E), torch.randn(E, E), torch.randn(E))[0],
        "native mha, nested": lambda: torch._native_multi_head_attention(
            *[torch.nested.nested_tensor([x[0], x[1, :3]])] * 3, E, 2, torch.randn(3 * E, E), torch.randn(3 * E),
            torch.randn(E, E), torch.randn(E))[0],
        "masked softmax": lambda: torch._masked_softmax(x, torch.zeros_like(x, dtype=torch.bool)),
        "vmap": lambda: torch.vmap(lambda a: sdpa(a, a, a))(q),
        "autocast": lambda: torch.autocast("cpu")(lambda: sdpa(q, q, q))(),
        "functionalize": lambda: torch.func.functionalize(lambda a: sdpa(a, a, a))(q),
        "thread": lambda: _in_thread(lambda: sdpa(q, q, q)),
    }
    ran = []
    for name, route in routes.items():
        try:
            route()
            ran.append(1.0)
        except Exception:
            ran.append(0.0)
    return torch.tensor([float(RESTORED)] + ran, dtype=torch.float64)


def _in_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]
'''
ROUTES = ("restored by the attack", "sdpa", "sdpa float64 (cast up and back)", "math", "flash", "flash backward",
          "fused choice", "native mha", "native mha, nested", "masked softmax", "vmap", "autocast",
          "functionalize", "thread")


@pytest.mark.skipif(bool(STRICT_PROBLEMS), reason="strict sandbox unavailable: " + "; ".join(STRICT_PROBLEMS))
@pytest.mark.parametrize("level", ["strict", "auto"])
def test_a_child_that_undoes_everything_still_cannot_run_a_builtin_attention_kernel(level):
    with SandboxSession(UNDO_EVERYTHING, "probe", level=level, limits=LIMITS) as session:
        assert session.load().ok, session.stderr[-2000:]
        result = session.call(torch.randn(2, 2, 5, 8, dtype=torch.float32))
    assert result.ok, (result.error, session.stderr[-2000:])
    ran = [name for name, flag in zip(ROUTES, result.output.tolist()) if flag]
    assert ran == [], ran


HONEST = sorted(glob.glob(os.path.join(HERE, "honest_under_block", "*.py")))


@pytest.mark.parametrize("path", HONEST, ids=lambda p: os.path.basename(p)[:-3])
def test_honest_code_that_uses_torch_machinery_scores_full_marks(path):
    """torch.compile, checkpointing, forward-mode AD: graded once, as the service grades (auto)."""
    with open(path, "rb") as f:
        report = grade_source(f.read(), "sdpa", seed=7, sandbox="auto")
    assert report.score == 100, [(c.id, c.message) for c in report.checks if not c.passed][:3]
