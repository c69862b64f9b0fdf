"""The sdpa_backward task's own machinery: the catalogue of wrong backwards, the autograd ban (by what a
name resolves to, forward mode included), and autograd switched off in the child."""
import pytest
import torch

from grader.checks import autograd_ban
from grader.tasks import TASKS
from reference_impl import attention_backward
from grader.tasks.sdpa_backward import bugs as backward_bugs, checks as backward
from grader.sandbox import SandboxSession

# Reverse and forward mode, reached by names the source scan can and cannot read: the run-time block
# must stop each route, in either of its layers (the Python raisers, or the native trap).
ROUTES = '''
import importlib
import torch

fw = importlib.import_module(bytes.fromhex("746f7263682e6175746f677261642e666f72776172645f6164").decode())


def f(x, route):
    if route == 0:
        x = x.clone().requires_grad_(True)
        return torch.autograd.grad((x * x).sum(), x)[0]
    if route == 1:
        x = x.clone().requires_grad_(True)
        (x * x).sum().backward()
        return x.grad
    if route == 2:
        with fw.dual_level():
            return fw.unpack_dual(fw.make_dual(x, torch.ones_like(x)) ** 2).tangent
    if route == 3:
        jvp = getattr(getattr(torch, "fu" + "nc"), bytes.fromhex("6a7670").decode())
        return jvp(lambda t: t * t, (x,), (torch.ones_like(x),))[1]
    level = torch._C._enter_dual_level()
    dual = torch.ops.aten._make_dual(x, torch.ones_like(x), level)
    tangent = torch._VF._unpack_dual(dual * dual, level)[1]
    torch._C._exit_dual_level(level)
    return tangent
'''
ROUTE_NAMES = ("autograd.grad", "Tensor.backward", "forward_ad", "func.jvp", "aten._make_dual")


def _inputs(L, S, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    return r(2, L, 5), r(2, S, 5), r(2, S, 7), r(2, L, 7)


CASES = [{}, {"is_causal": True}, {"scale": 0.3}, {"attn_mask": torch.tensor([[True, False, True, True]] * 3)},
         {"attn_mask": torch.tensor([[0.5, -1.0, float("-inf"), 2.0]] * 3, dtype=torch.float64)}]


@pytest.mark.parametrize("kwargs", CASES)
def test_the_hand_written_backward_is_autograds_and_every_bug_differs(kwargs):
    q, k, v, g = _inputs(3, 4)
    args = (kwargs.get("attn_mask"), kwargs.get("is_causal", False), kwargs.get("scale"))
    ref = backward.reference_grads(q, k, v, g, **kwargs)
    correct, bugs = backward_bugs.hand_written(q, k, v, g, *args)
    for a, b in zip(correct, ref):
        assert torch.allclose(a, b, atol=1e-12)
    flat = torch.cat([t.reshape(-1) for t in ref])
    for name, wrong in backward_bugs.candidates(q, k, v, g, *args).items():
        assert name.split(":")[0] in TASKS["sdpa_backward"].bugs, name
        assert not torch.allclose(torch.cat([t.reshape(-1) for t in wrong]).nan_to_num(), flat, rtol=0,
                                  atol=1e-7), name
    if not kwargs:
        assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(attention_backward(q, k, v, g), ref))


def test_shape_changing_bugs_are_candidates_only_where_the_shapes_allow():
    square = backward_bugs.hand_written(*_inputs(4, 4))[1]
    assert {"dv_not_transposed", "dk_not_transposed", "dq_transposed", "dq_dk_swapped"} <= set(square)
    assert not backward_bugs.SHAPE_BUGS & set(backward_bugs.hand_written(*_inputs(3, 4))[1])


def test_every_named_backward_bug_has_a_sentence_and_a_home_family():
    bugs = TASKS["sdpa_backward"].bugs
    for name in backward_bugs.BUGS:
        assert bugs.explain(name) and bugs.home_family(name, TASKS["sdpa_backward"].points), name


def test_the_backward_s_own_sentences_are_the_ones_shown():
    """A name attention also has is worded for the backward in this task's catalogue, and only there."""
    from grader.checks.variants import ATTENTION
    for name in ("causal_ignored", "float_mask_ignored"):
        own = str(TASKS["sdpa_backward"].bugs.explain(name))
        assert own == str(backward.SPEC.explain(name)) == backward_bugs.BUGS[name], name
        assert own != str(ATTENTION.explain(name)) == str(TASKS["sdpa"].bugs.explain(name)), name
    assert "backward" in str(TASKS["sdpa_backward"].bugs.explain("causal_ignored"))


SCAN = {
    # honest code: its own names, a NumPy layer's backward, a variable called grad, switching recording off
    "import numpy as np\nclass S:\n  def backward(self, d): return d\nclass A:\n  def __init__(self): "
    "self.softmax = S()\n  def f(self, d): return self.softmax.backward(d), self.W.grad\n": [],
    "def f(grad, backward):\n  grad = grad * 2\n  return backward(grad)\n": [],
    "import torch\nwith torch.no_grad(): pass\nwith torch.autograd.no_grad(): pass\n"
    "torch.set_grad_enabled(False)\n": [],
    "import torch\nclass F(torch.autograd.Function):\n  @staticmethod\n"
    "  def backward(ctx, g): return g\n": [],
    "class P:\n  def __init__(self, requires_grad=False): self.requires_grad = requires_grad\n"
    "P(requires_grad=True)\n": [],
    "import torch\nf = torch.func.vmap\ndef g(layer, d): return getattr(layer, 'backward')(d)\n": [],
    # autograd, however it is named
    "import torch\ndef f(q): return torch.autograd.grad(q, q)\n": ["torch.autograd.grad"],
    "import torch as th\nag = th.autograd\ng = ag.grad\n": ["torch.autograd.grad"],
    "from torch.autograd import grad as G\n": ["grad from torch.autograd"],
    "import torch\ndef f(q):\n  (q*q).sum().backward()\n": [".backward"],
    "def f(q):\n  q.requires_grad_()\n": [".requires_grad_"],
    "def f(q):\n  q.requires_grad = True\n": ["requires_grad"],
    "import torch\nx = torch.randn(3, requires_grad=True)\n": ["requires_grad"],
    "import torch\nwith torch.enable_grad(): pass\ntorch.set_grad_enabled(True)\n": ["enable_grad", "set_grad_enabled"],
    "import torch\n_e = getattr(torch, 'auto' + 'gr' + 'ad')\n": ["'autograd'"],
    "import torch\nE = getattr(torch._C, '_Imperative' + 'Engine')\n": ["'engine'"],
    "import sys\nsys.modules['torch.autograd'].grad\n": ["torch.autograd.grad"],
    "exec('out.backward()')\n": [".backward"],
    "import torch\ny = torch.ops.aten._softmax_backward_data\n": ["_softmax_backward_data"],
    "import jax\n": ["jax"],
    # forward mode, named as such
    "import torch.autograd.forward_ad as fwAD\nwith fwAD.dual_level():\n  d = fwAD.make_dual(1, 1)\n":
        ["dual_level (forward-mode", "make_dual (forward-mode"],
    "from torch.func import jvp, jacfwd\n": ["jvp from torch.func (forward-mode", "jacfwd from torch.func"],
    "import torch\nlvl = torch._C._enter_dual_level()\nd = torch._make_dual\n": ["_enter_dual_level", "_make_dual"],
    "import importlib\nimportlib.import_module('torch.func').jvp\n": ["torch.func.jvp (forward-mode"],
}


@pytest.mark.parametrize("source", SCAN, ids=range(len(SCAN)))
def test_the_scan_names_what_resolves_to_autograd_and_nothing_else(source):
    found = " | ".join(f["what"] for f in autograd_ban.scan(source))
    if not SCAN[source]:
        assert not found
    for part in SCAN[source]:
        assert part in found, found


def _blocked(result) -> bool:
    """Refused by either layer: the Python raiser (AutogradDisabled) or the native trap's RuntimeError."""
    return not result.ok and (result.error.exc_type == "AutogradDisabled" or "autograd" in result.error.message)


def test_autograd_raises_in_a_child_that_blocks_it_and_only_there():
    x = torch.randn(3, dtype=torch.float64)
    with SandboxSession(ROUTES, "f", level="auto") as free:
        for route, name in enumerate(ROUTE_NAMES):
            result = free.call(x, route)
            assert result.ok and torch.allclose(result.output, 2 * x), (name, result.error)
    with SandboxSession(ROUTES, "f", level="auto", block=("autograd",)) as blocked:
        for route, name in enumerate(ROUTE_NAMES):
            result = blocked.call(x, route)
            assert _blocked(result), (name, result.error, result.output)


DERIVATIVES = '''
import importlib
import types
import torch

_d = lambda h: bytes.fromhex(h).decode()
SOFTMAX_BACKWARD = _d("5f736f66746d61785f6261636b776172645f64617461")


def _forward(t):
    return torch.softmax(t * t, dim=-1)


def f(x, route):
    y = torch.softmax(x, dim=-1)
    if route == 0:   # the native kernel through its Python binding
        return getattr(torch, SOFTMAX_BACKWARD)(x, y, -1, y.dtype)
    if route == 1:   # the same kernel through the dispatcher
        return getattr(torch.ops.aten, SOFTMAX_BACKWARD).default(x, y, -1, y.dtype)
    if route == 2:   # its Python formula in torch's decomposition tables
        table = importlib.import_module(_d("746f7263682e5f6465636f6d70")).decomposition_table
        return table[getattr(torch.ops.aten, SOFTMAX_BACKWARD).default](x, y, -1, y.dtype)
    if route == 3:   # flex attention's dense backward, from its higher-order operator's kernel table
        flex = importlib.import_module("torch._higher_order_ops.flex_attention")
        dense = next(k for k in flex.flex_attention_backward.py_kernels.values() if isinstance(k, types.FunctionType))
        q = x.reshape(1, 1, 1, -1)
        out = dense(q, q, q, q, q.sum(-1), q, None, lambda s, b, h, m, n: s,
                    lambda s, b, h, m, n, g: [g, None, None, None, None], (1, 1, None, None, None, None, None, None,
                                                                           None, None, 1, 1, lambda b, h, m, n: True),
                    1.0, {}, (), ())
        return out[0].reshape(-1)
    if route == 4:   # TorchScript's symbolic differentiation of a scripted forward
        scripted = torch.jit.script(_forward)
        gradient = torch._C._jit_differentiate(scripted.graph)
        return x + len(str(gradient.df))
    return getattr(torch.ops.aten, _d("7468726573686f6c645f6261636b77617264")).default(x, y, 0.0)  # any *_backward
'''
DERIVATIVE_ROUTES = ("_softmax_backward_data", "torch.ops.aten", "decomposition table", "flex attention's dense backward",
                     "TorchScript autodiff", "threshold_backward")


def test_every_derivative_torch_has_is_refused_where_autograd_is_blocked_and_only_there():
    """The native *_backward* kernels, the decompositions' formulas, flex attention's dense backward and
    TorchScript's autodiff: refused in a child that blocks autograd, for that reason only."""
    x = torch.randn(6, dtype=torch.float64)
    with SandboxSession(DERIVATIVES, "f", level="auto") as free:
        outcomes = {name: free.call(x, route) for route, name in enumerate(DERIVATIVE_ROUTES)}
    with SandboxSession(DERIVATIVES, "f", level="auto", block=("autograd",)) as blocked:
        for route, name in enumerate(DERIVATIVE_ROUTES):
            result = blocked.call(x, route)
            if name == "flex attention's dense backward":  # attention's derivative: refused in every child
                assert outcomes[name].error.exc_type == result.error.exc_type == "BuiltinAttentionDisabled"
                continue
            assert outcomes[name].ok, (name, outcomes[name].error)
            assert _blocked(result), (name, result.error, result.output)
