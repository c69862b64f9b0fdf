"""The sdpa_backward task's own machinery: the hand-written variants, and autograd switched off in the child."""
import pytest
import torch

from grader.checks import backward
from grader.sandbox import SandboxSession

AUTOGRAD = '''
import torch

def f(x):
    x = x.clone().requires_grad_(True)
    return torch.autograd.grad((x * x).sum(), x)[0]
'''
ENGINE = '''
import torch

def f(x):
    x = x.clone().requires_grad_(True)
    (x * x).sum().backward()
    return x.grad
'''


def _inputs(L, S, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    return r(2, L, 5), r(2, S, 5), r(2, S, 7), r(2, L, 7)


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3},
                                    {"attn_mask": torch.tensor([[True, False, True, True]] * 3)},
                                    {"attn_mask": torch.tensor([[0.5, -1.0, float("-inf"), 2.0]] * 3,
                                                               dtype=torch.float64)}])
def test_the_hand_written_backward_is_autograds_and_every_bug_differs(kwargs):
    q, k, v, g = _inputs(3, 4)
    ref = backward.reference_grads(q, k, v, g, **kwargs)
    mine = backward.variant(q, k, v, g, **kwargs)
    for a, b in zip(mine, ref):
        assert torch.allclose(a, b, atol=1e-12)
    flat = torch.cat([t.reshape(-1) for t in ref])
    for name, wrong in backward._variants(q, k, v, g, kwargs.get("attn_mask"), kwargs.get("is_causal", False),
                                          kwargs.get("scale")).items():
        assert name in backward.BUGS
        assert not torch.allclose(wrong, flat, atol=1e-6), name


def test_transposition_bugs_are_told_apart_only_where_shapes_allow():
    q, k, v, g = _inputs(4, 4)
    square = backward._variants(q, k, v, g, None, False, None)
    assert {"dv_not_transposed", "dk_not_transposed", "dq_transposed", "dq_dk_swapped"} <= set(square)
    q, k, v, g = _inputs(3, 4)
    assert "dv_not_transposed" not in backward._variants(q, k, v, g, None, False, None)


@pytest.mark.parametrize("source", [AUTOGRAD, ENGINE], ids=["autograd.grad", "Tensor.backward"])
def test_autograd_raises_in_a_child_that_blocks_it_and_only_there(source):
    x = torch.randn(3)
    with SandboxSession(source, "f", level="auto") as free:
        assert free.call(x).ok
    with SandboxSession(source, "f", level="auto", block=("autograd",)) as blocked:
        result = blocked.call(x)
        assert not result.ok and result.error.exc_type == "AutogradDisabled"
        assert any(b.startswith("autograd:") for b in result.blocked)
