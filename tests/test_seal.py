"""torch's own Python code that computes attention or derivatives (grader/sandbox/seal.py): stripped in
place by a stated rule in every child, and torch's files sealed from the zygote's children; attacked
from inside the child."""
import importlib
import importlib.util
import os

import pytest
import torch

from grader.sandbox import Limits, SandboxSession, wall

HERE = os.path.dirname(os.path.abspath(__file__))
STRICT_PROBLEMS = wall.strict_problems()
LIMITS = Limits(cpu_seconds=60, wall_seconds=90, call_seconds=60, load_seconds=60, memory_bytes=4 << 30)


def _seal():
    path = os.path.join(os.path.dirname(HERE), "grader", "sandbox", "seal.py")
    spec = importlib.util.spec_from_file_location("_attn_seal_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the rule only: nothing is stripped in this process
    return module


def test_the_rule_names_torchs_attention_code_and_no_honest_building_block():
    flex = importlib.import_module("torch._higher_order_ops.flex_attention")
    import torch._inductor.fx_passes.fuse_attention as patterns
    import torch.nn.functional as F
    seal = _seal()
    computing = [F.multi_head_attention_forward, patterns._sfdp_pattern_1, patterns._sfdp_pattern_5,
                 flex.math_attention, flex.sdpa_dense_backward]
    assert all(seal.torch_owned(f) and seal.computes_attention(f.__code__) for f in computing)
    honest = [F.softmax, F.dropout, F.log_softmax, F.pad, torch.functional.einsum, torch.nn.Module._call_impl,
              torch.nn.Linear.forward, torch.nn.Dropout.forward, torch.Tensor.__rmatmul__, torch.nn.init.xavier_uniform_,
              torch.utils.checkpoint.checkpoint, torch.overrides.get_testing_overrides.__wrapped__]
    assert not [f.__qualname__ for f in honest if seal.computes_attention(f.__code__)]
    assert seal.is_derivative(flex.sdpa_dense_backward.__code__)
    assert not seal.is_derivative(F.softmax.__code__)


PROBE = r'''
import importlib, marshal, os, types
import torch, torch.nn.functional as F

def _fuse_attention():
    return importlib.import_module(bytes.fromhex(
        "746f7263682e5f696e647563746f722e66785f7061737365732e667573655f617474656e74696f6e").decode())

def _dense_backward():
    flex = importlib.import_module("torch._higher_order_ops.flex_attention")
    return next(f for f in flex.flex_attention_backward.py_kernels.values() if isinstance(f, types.FunctionType))

def probe(x, route):
    q = x.reshape(1, 2, 3, 4)
    if route == 0:   # honest building blocks
        w = torch.nn.Linear(4, 4, dtype=x.dtype)
        s = torch.einsum("bhle,bhse->bhls", q, q).masked_fill(torch.ones(3, 3, dtype=torch.bool).triu(1), -1e9)
        return F.dropout(F.softmax(s, dim=-1), 0.0) @ F.linear(w(q), w.weight) + torch.softmax(q @ q.mT, -1) @ q
    if route == 1:   # a torch module with attention in plain Python, imported after grading began
        return _fuse_attention()._sfdp_pattern_1(q, q, q, 2.0)
    if route == 2:   # a function rebuilt from the code object of one held in a kernel table
        f = _dense_backward()
        return types.FunctionType(f.__code__, f.__globals__, "rebuilt", f.__defaults__, f.__closure__)(q, q, q)
    if route == 3:   # the same, from an attention pattern, with fresh globals
        f = _fuse_attention()._sfdp_pattern_5
        return types.FunctionType(f.__code__, {"torch": torch})(q, q, q, torch.zeros(3, 3), 2.0)
    if route == 4:   # torch's bytecode, loaded with marshal
        path = importlib.util.cache_from_source(F.__file__)
        with open(path, "rb") as f:
            code = marshal.loads(f.read()[16:])
        return x + len(code.co_consts)
    if route == 5:   # torch's source, read and executed
        with open(F.__file__) as f:
            return x + len(f.read())
    if route == 6:   # a fresh copy of a torch module
        importlib.reload(F)
        return x
    if route == 7:   # torch's Python files the children can see
        found = [n for _, _, names in os.walk(os.path.dirname(torch.__file__)) for n in names
                 if n.endswith((".py", ".pyc"))]
        return torch.full_like(x, len(found))
    if route == 8:   # a stripped function's code cannot be serialised for a fresh start elsewhere
        return x + len(marshal.dumps(_dense_backward().__code__))
'''
ROUTES = ("honest", "new module", "rebuilt from a kernel table", "rebuilt with fresh globals", "marshal of a .pyc",
          "source read", "reload", "package listing", "marshal.dumps of a stub")


def _outcomes(level):
    x = torch.randn(24, dtype=torch.float32)
    with SandboxSession(PROBE, "probe", level=level, limits=LIMITS) as session:
        assert session.load().ok, session.stderr[-2000:]
        return {name: session.call(x, route) for route, name in enumerate(ROUTES)}


def _refused(result, *words) -> bool:
    return not result.ok and any(w in f"{result.error.exc_type}: {result.error.message}" for w in words)


@pytest.mark.skipif(bool(STRICT_PROBLEMS), reason="strict sandbox unavailable: " + "; ".join(STRICT_PROBLEMS))
def test_a_strict_child_can_neither_run_nor_read_torchs_attention_code():
    out = _outcomes("strict")
    assert out["honest"].ok, out["honest"].error
    for name in ("new module", "rebuilt with fresh globals"):
        assert _refused(out[name], "not available while grading"), (name, out[name].error)
    assert _refused(out["rebuilt from a kernel table"], "BuiltinAttentionDisabled"), out["rebuilt from a kernel table"]
    for name in ("marshal of a .pyc", "source read", "reload"):
        assert not out[name].ok, name  # nothing of torch's files is there to read
    assert out["package listing"].ok and not out["package listing"].output.any(), "no Python file of torch's is there"
    assert _refused(out["marshal.dumps of a stub"], "unmarshallable"), out["marshal.dumps of a stub"].error


def test_a_plain_child_strips_torchs_attention_code_in_memory():
    """The pre-check's level: torch's files are readable there (SECURITY.md), its code in memory is not."""
    out = _outcomes("none")
    assert out["honest"].ok, out["honest"].error
    for name in ("new module", "rebuilt from a kernel table", "rebuilt with fresh globals"):
        assert _refused(out[name], "BuiltinAttentionDisabled"), (name, out[name].error)
    assert _refused(out["marshal.dumps of a stub"], "unmarshallable"), out["marshal.dumps of a stub"].error
