"""The parent's fingerprint of torch's fused kernels (grader/checks/fingerprint.py), both ways.

Every way a child can run the kernel and hand back its result, in every dtype the grader calls
with and through every other dtype and back, is recognised; and no correct hand-written file of
the corpora (tests/corpus/*/correct and the correct files from elsewhere) matches it bit for bit
on the same draws of ordinary and fingerprint calls.
"""
import glob
import importlib.util
import os

import pytest
import torch
import torch.nn.functional as F

from grader.checks.fingerprint import kernel_output
from grader.checks.inputs import InputFactory
from grader.tasks import TASKS

HERE = os.path.dirname(os.path.abspath(__file__))
# Each task's part lies in its folder (grader/tasks/<id>/fingerprint.py).
FINGERPRINTS = {task_id: TASKS[task_id].fingerprint
                for task_id in ("sdpa", "mha", "tiled_attention", "decoder_attention", "sdpa_backward",
                                "kv_cache_attention")}
SDPA_FINGERPRINT, MHA_FINGERPRINT, DECODER_FINGERPRINT, BACKWARD_FINGERPRINT = (
    FINGERPRINTS[t] for t in ("sdpa", "mha", "decoder_attention", "sdpa_backward"))
FUNCTIONS = {"sdpa": "scaled_dot_product_attention", "mha": "multi_head_attention",
             "tiled_attention": "tiled_attention", "decoder_attention": "decoder_attention",
             "sdpa_backward": "scaled_dot_product_attention_backward", "kv_cache_attention": "kv_cache_attention"}
SEEDS = (1, 2, 3)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """As the grader's parent computes (grading workers and the CLI): on a loaded 2-core machine
    torch's second thread made these small products 20 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class _Draws:
    def __init__(self, seed):
        self.inputs = InputFactory(seed)


def _samples(task, dtype, seed):
    """The fingerprint's own draw, and for sdpa the masked and causal calls the checks make."""
    ctx = _Draws(seed)
    args = FINGERPRINTS[task].sample(ctx, dtype)
    out = [(args, {})]
    if task in ("sdpa", "sdpa_backward"):
        q, k, v = args[:3]
        L, S = q.size(-2), k.size(-2)
        out += [(args, {"attn_mask": ctx.inputs.bool_mask(L, S)}), (args, {"is_causal": True}),
                (args, {"attn_mask": ctx.inputs.float_mask(L, S, dtype=dtype)}), (args, {"scale": 0.3})]
    return out


def _correct_files():
    found = []
    for task in FINGERPRINTS:
        found += [(task, p) for p in sorted(glob.glob(os.path.join(TASKS[task].corpus, "correct", "*.py")))]
        for p in sorted(glob.glob(os.path.join(HERE, "corpus", "elsewhere", task, "*.py"))):
            with open(p, encoding="utf-8") as f:
                if not f.readline().startswith("# expect:"):
                    found.append((task, p))
    return found


def _load(path, function):
    spec = importlib.util.spec_from_file_location(f"corpus_{os.path.basename(path)[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function)


@pytest.mark.parametrize("task, path", _correct_files(), ids=lambda x: os.path.basename(x)[:-3] if "/" in x else x)
def test_no_hand_written_attention_is_taken_for_the_kernel(task, path):
    fn = _load(path, FUNCTIONS[task])
    samples = []
    for seed in SEEDS:
        for dtype in (torch.float32, torch.float64):
            for args, kwargs in _samples(task, dtype, seed):
                samples.append((args, kwargs, fn(*args, **kwargs)))
    assert not kernel_output(FINGERPRINTS[task], samples)


def _sdpa_cheats():
    """The kernel as a child can reach it: the call's dtype, and through every other dtype and back."""
    def through(dtype):
        return lambda q, k, v, **kw: F.scaled_dot_product_attention(
            q.to(dtype), k.to(dtype), v.to(dtype), **{n: (m.to(dtype) if m.is_floating_point() else m)
                                                      if isinstance(m, torch.Tensor) else m
                                                      for n, m in kw.items()}).to(q.dtype)
    return {"as called": F.scaled_dot_product_attention, "via float64": through(torch.float64),
            "via float32": through(torch.float32), "via float16": through(torch.float16),
            "via bfloat16": through(torch.bfloat16)}


@pytest.mark.parametrize("how", list(_sdpa_cheats()))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_the_kernel_is_recognised_in_every_dtype_and_round_trip(how, dtype):
    cheat = _sdpa_cheats()[how]
    samples = [(args, kw, cheat(*args, **kw)) for args, kw in _samples("sdpa", dtype, 5)]
    if how == "via float64" and dtype == torch.float32:
        # The one variant values cannot show: float64 rounded to float32 is what an honest float64
        # computation gives too. The same child's float64 calls run the kernel as called.
        assert not kernel_output(SDPA_FINGERPRINT, samples)
        samples = [(args, kw, cheat(*args, **kw)) for args, kw in _samples("sdpa", torch.float64, 5)]
    assert kernel_output(SDPA_FINGERPRINT, samples)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_the_kernel_is_recognised_through_torchs_multi_head_modules(dtype):
    args = MHA_FINGERPRINT.sample(_Draws(4), dtype)
    x_q, x_kv, w_q, w_k, w_v, w_o, H = args
    D = x_q.size(-1)
    seq = lambda x: x.transpose(0, 1)
    functional, _ = F.multi_head_attention_forward(
        seq(x_q), seq(x_kv), seq(x_kv), D, H, None, None, None, None, False, 0.0, w_o, None, training=False,
        need_weights=False, use_separate_proj_weight=True, q_proj_weight=w_q, k_proj_weight=w_k, v_proj_weight=w_v)
    module = torch.nn.MultiheadAttention(D, H, bias=False, batch_first=True, kdim=D + 0, vdim=D).to(dtype).eval()
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        module.out_proj.weight.copy_(w_o)
        by_module = module(x_q, x_kv, x_kv, need_weights=False)[0]
    assert kernel_output(MHA_FINGERPRINT, [(args, {}, seq(functional))])
    assert kernel_output(MHA_FINGERPRINT, [(args, {}, by_module)])


def test_decoder_attention_has_a_fingerprint():
    """decoder_attention through the kernel: two sdpa calls on (B, 1, T, D) views with padding masks."""
    target, memory, t_len, m_len = args = DECODER_FINGERPRINT.sample(_Draws(6), torch.float32)
    T_, S = target.size(1), memory.size(1)
    keys = lambda n, lens: (torch.arange(n)[None, :] < lens[:, None])[:, None, None, :]
    rows = keys(T_, t_len)[:, 0, 0, :, None]
    x = target.unsqueeze(1)
    self_out = F.scaled_dot_product_attention(x, x, x, attn_mask=keys(T_, t_len)
                                              & torch.ones(T_, T_, dtype=torch.bool).tril()).squeeze(1) * rows
    cross = F.scaled_dot_product_attention(self_out.unsqueeze(1), memory.unsqueeze(1), memory.unsqueeze(1),
                                           attn_mask=keys(S, m_len)).squeeze(1) * rows
    assert kernel_output(DECODER_FINGERPRINT, [(args, {}, (self_out, cross))])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_sdpa_backward_through_the_fused_kernel_is_recognised(dtype):
    """(dQ, dK, dV) from the fused kernel's own backward (autograd through F.sdpa)."""
    def by_autograd(q, k, v, g, **kwargs):
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        return torch.autograd.grad(F.scaled_dot_product_attention(*leaves, **kwargs), leaves, g)
    samples = [(args, kw, by_autograd(*args, **kw)) for args, kw in _samples("sdpa_backward", dtype, 8)]
    assert kernel_output(BACKWARD_FINGERPRINT, samples)


def test_the_kv_cache_step_through_the_kernel_is_recognised():
    """kv_cache_attention through torch's fused kernel on (B, 1, n, D) views of the cache's filled rows."""
    def through_kernel(query, key, value, k_cache, v_cache, position):
        k_cache, v_cache = k_cache.clone(), v_cache.clone()
        k_cache[:, position], v_cache[:, position] = key[:, 0], value[:, 0]
        out = F.scaled_dot_product_attention(query[:, None], k_cache[:, None, :position + 1],
                                             v_cache[:, None, :position + 1])
        return out[:, 0], k_cache, v_cache
    samples = []
    for seed in SEEDS:
        args = FINGERPRINTS["kv_cache_attention"].sample(_Draws(seed), torch.float32)
        samples.append((args, {}, through_kernel(*args)))
    assert kernel_output(FINGERPRINTS["kv_cache_attention"], samples)
