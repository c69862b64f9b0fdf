"""One prepared check of the reference attention on a GPU, for when a GPU machine is lent.

    python benchmarks/gpu_check.py [--quick] [--steps accuracy,timing] [--device cuda] [--out DIR]

It runs a list of named steps (``STEPS``; add a step by appending a function to it):

- ``environment``: torch, CUDA and the device in use.
- ``accuracy``: the reference in fp32/fp16/bf16 on the device against the float64 CPU result
  (``sdpa_float64``) of the same rounded inputs, forward and backward (dq, dk, dv), without a
  mask, causal, with a boolean and a float mask, and cross-attention with L != S. The limit is
  FlashAttention's rule: a multiple of the error torch's own SDPA makes in the same dtype on the
  same device, plus a rounding floor of the dtype at the result's magnitude.
- ``fully-masked``: rows whose every key is masked give zeros and zero gradients, never NaN.
- ``experiments``: ``attn-grader experiments`` gives the CPU's numbers on the device.
- ``timing``: forward and forward+backward of the reference against torch's fused SDPA, as a
  ratio (information, never a failure).
- ``grading``: a correct and a buggy submission (exp of unshifted scores) graded on the device
  by ``grade_source`` and by the GPU suite (``grader/checks/gpu_suite.py``: float16/bfloat16
  checks, and the submission's speed against the reference and fused SDPA, 0 points). The
  correct one must get full marks and pass the suite; the buggy one must lose points, and on
  CUDA fail a float16 check.

Without CUDA it says so and runs what it can on the CPU with small shapes, in seconds, so the
script can be smoke-tested anywhere. Prints a table, writes ``gpu_check.json`` to ``--out`` or
``$OUT`` when set, and exits 1 when a check fails.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import traceback
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils import benchmark

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from reference_impl import scaled_dot_product_attention, sdpa_float64  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
#: Multiples of torch's same-dtype error allowed to the reference. FlashAttention's tests allow 2
#: (outputs) and 2-3 (gradients) against a *math* reference run in the low dtype. Torch's kernels
#: keep the scores and the softmax in fp32, while the reference rounds them to fp16/bf16 (and adds
#: a float mask there), so it is that much less accurate: on the CPU it measured up to 5.4x
#: (fp16, float mask, output). A real bug costs ≥ 0.06 with randn inputs, far above these limits.
FACTOR = {"out": 8.0, "grad": 10.0}


@dataclass
class Check:
    """One line of the report. status: pass, fail, info (measured, no verdict) or skip."""
    step: str
    name: str
    status: str
    measured: str = ""
    limit: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class Context:
    device: torch.device
    quick: bool
    seed: int = 0

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"


def _sync(ctx: Context) -> None:
    if ctx.cuda:
        torch.cuda.synchronize()


# --- environment --------------------------------------------------------------------------------

def step_environment(ctx: Context) -> list[Check]:
    data = {"torch": torch.__version__, "python": platform.python_version(),
            "cuda_available": torch.cuda.is_available(), "cuda_version": torch.version.cuda,
            "device": str(ctx.device)}
    if ctx.cuda:
        props = torch.cuda.get_device_properties(ctx.device)
        data.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    capability=f"{props.major}.{props.minor}",
                    tf32_matmul=torch.backends.cuda.matmul.allow_tf32)
        measured = f"{props.name}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    else:
        measured = f"CUDA absent: CPU only, small shapes (torch {torch.__version__})"
    return [Check("environment", "device", "info", measured, data=data)]


# --- accuracy -----------------------------------------------------------------------------------

def _cases(ctx: Context) -> list[dict]:
    """(B, H, L, S, E) per case with odd sizes, as in FlashAttention's tests."""
    small = ctx.quick or not ctx.cuda
    B, H, L, S, E = (1, 2, 33, 33, 16) if small else (2, 8, 257, 257, 64)
    Lx, Sx = (17, 41) if small else (113, 203)
    return [dict(name="no mask", shape=(B, H, L, S, E), mask=None),
            dict(name="causal", shape=(B, H, L, S, E), mask="causal"),
            dict(name="bool mask", shape=(B, H, L, S, E), mask="bool"),
            dict(name="float mask", shape=(B, H, L, S, E), mask="float"),
            dict(name="cross L!=S", shape=(B, H, Lx, Sx, E), mask=None),
            dict(name="causal L!=S", shape=(B, H, Lx, Sx, E), mask="causal")]


def _inputs(shape, mask_kind, g):
    B, H, L, S, E = shape
    q, k, v = (torch.randn(B, H, n, E, generator=g, dtype=torch.float64) for n in (L, S, S))
    upstream = torch.randn(B, H, L, E, generator=g, dtype=torch.float64)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(B, 1, L, S, generator=g) > 0.3
        mask[..., 0] = True  # fully masked rows have their own step
    elif mask_kind == "float":
        mask = torch.randn(1, H, L, S, generator=g, dtype=torch.float64)
    return q, k, v, upstream, mask


def _forward_backward(fn, q, k, v, upstream, mask, causal):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, attn_mask=mask, is_causal=causal)
    grads = torch.autograd.grad(out, (q, k, v), upstream)
    return (out, *grads)


def _rounding_floor(gold: torch.Tensor, dtype: torch.dtype) -> float:
    # FlashAttention's floor: what merely storing the result in this dtype costs.
    low = gold.to(dtype)
    return 2 * ((low + 0.3 - 0.3).double() - low.double()).abs().max().item()


def step_accuracy(ctx: Context) -> list[Check]:
    checks = []
    g = torch.Generator().manual_seed(ctx.seed)
    for case in _cases(ctx):
        q, k, v, upstream, mask = _inputs(case["shape"], case["mask"], g)
        causal = case["mask"] == "causal"
        for dname, dtype in DTYPES.items():
            low = [t.to(dtype) for t in (q, k, v, upstream)]
            low_mask = mask.to(dtype) if mask is not None and mask.is_floating_point() else mask
            # Gold: float64 on the CPU from the same rounded inputs.
            gold = _forward_backward(sdpa_float64, *low, low_mask, causal)
            dev = [t.to(ctx.device) for t in low]
            dev_mask = None if low_mask is None else low_mask.to(ctx.device)
            ours = _forward_backward(scaled_dot_product_attention, *dev, dev_mask, causal)
            torch_ = _forward_backward(F.scaled_dot_product_attention, *dev, dev_mask, causal)
            for label, gd, o, t in zip(("out", "dq", "dk", "dv"), gold, ours, torch_):
                kind = "out" if label == "out" else "grad"
                err = (o.double().cpu() - gd).abs().max().item()
                torch_err = (t.double().cpu() - gd).abs().max().item()
                limit = FACTOR[kind] * torch_err + _rounding_floor(gd, dtype)
                ok = math.isfinite(err) and err <= limit and o.dtype == dtype
                checks.append(Check(
                    "accuracy", f"{case['name']} {label}", "pass" if ok else "fail",
                    f"{dname} err {err:.2e} (torch {torch_err:.2e}, "
                    f"x{err / max(torch_err, 1e-30):.1f})",
                    f"<= {limit:.2e}",
                    data=dict(case=case["name"], shape=case["shape"], dtype=dname, tensor=label,
                              err=err, torch_err=torch_err, limit=limit)))
    return checks


# --- fully masked rows --------------------------------------------------------------------------

def step_fully_masked(ctx: Context) -> list[Check]:
    checks = []
    g = torch.Generator().manual_seed(ctx.seed + 1)
    for dname, dtype in DTYPES.items():
        q, k, v = (torch.randn(2, 5, 8, generator=g).to(ctx.device, dtype).requires_grad_()
                   for _ in range(3))
        mask = torch.ones(2, 5, 5, dtype=torch.bool, device=ctx.device)
        mask[:, 2] = False  # query 2 may attend to nothing
        out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
        zero_row = bool((out[:, 2] == 0).all() and (dq[:, 2] == 0).all())
        finite = all(bool(torch.isfinite(t).all()) for t in (out, dq, dk, dv))
        checks.append(Check("fully-masked", "zeros, zero dq, no NaN",
                            "pass" if zero_row and finite else "fail",
                            f"{dname} zero row {zero_row}, finite {finite}"))
    return checks


# --- experiments on the device ------------------------------------------------------------------

def step_experiments(ctx: Context) -> list[Check]:
    from reference_impl.experiments import gradient_flow, softmax_saturation

    if not ctx.cuda:
        return [Check("experiments", "device == CPU numbers", "skip", "CUDA absent")]
    checks = []
    for fn in (softmax_saturation, gradient_flow):
        cpu, dev = fn(seed=ctx.seed, device="cpu"), fn(seed=ctx.seed, device=ctx.device)
        worst = 0.0  # largest difference as a fraction of what is allowed
        for a, b in zip(cpu, dev):
            for key, x in asdict(a).items():
                if isinstance(x, float):
                    # Shares may flip a row at a threshold; near-zero Jacobian norms are
                    # cancellation noise of ~1e-8 (see softmax_jacobian_norm).
                    allowed = 2 / a.rows if key.startswith("share") else 1e-6 * abs(x) + 1e-7
                    worst = max(worst, abs(getattr(b, key) - x) / allowed)
        checks.append(Check("experiments", fn.__name__, "pass" if worst <= 1 else "fail",
                            f"worst diff {worst:.2f} of allowed", "rel 1e-6 + 1e-7, shares 2 rows"))
    return checks


# --- timing -------------------------------------------------------------------------------------

def step_timing(ctx: Context) -> list[Check]:
    if ctx.cuda:
        B, H, L, E = (2, 8, 512, 64) if ctx.quick else (4, 16, 2048, 64)
        dtypes = DTYPES
    else:
        B, H, L, E = 1, 4, 128, 32
        dtypes = {"fp32": torch.float32}
    checks = []
    g = torch.Generator().manual_seed(ctx.seed + 2)
    for dname, dtype in dtypes.items():
        q, k, v = (torch.randn(B, H, L, E, generator=g).to(ctx.device, dtype).requires_grad_()
                   for _ in range(3))
        for causal in (False, True):
            for mode in ("forward", "fwd+bwd"):
                times = {}
                for who, fn in (("ours", scaled_dot_product_attention),
                                ("torch", F.scaled_dot_product_attention)):
                    def run(fn=fn):
                        out = fn(q, k, v, is_causal=causal)
                        if mode == "fwd+bwd":
                            out.backward(torch.ones_like(out))
                    run()  # warm-up
                    _sync(ctx)
                    timer = benchmark.Timer("run()", globals={"run": run})
                    min_time = 0.05 if ctx.quick else 0.3
                    times[who] = timer.blocked_autorange(min_run_time=min_time).median
                ratio = times["ours"] / times["torch"]
                checks.append(Check(
                    "timing", f"{mode}{' causal' if causal else ''}", "info",
                    f"{dname} ours {times['ours'] * 1e3:.3f} ms, "
                    f"torch {times['torch'] * 1e3:.3f} ms, ratio {ratio:.2f}",
                    f"B{B} H{H} L{L} E{E}",
                    data=dict(dtype=dname, causal=causal, mode=mode, shape=(B, H, L, L, E),
                              ours_s=times["ours"], torch_s=times["torch"], ratio=ratio)))
    return checks


# --- grading on the device ----------------------------------------------------------------------

# The corpus's textbook implementation (full marks), and the same file with one bug: exp() of
# scores never shifted by the row maximum, which overflows in float16.
CORPUS_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "grader", "tasks", "sdpa", "corpus", "correct", "matmul_softmax.py")
with open(CORPUS_FILE, encoding="utf-8") as _f:
    CORRECT_SUBMISSION = _f.read()
_SOFTMAX = "torch.softmax(scores, dim=-1)"
assert _SOFTMAX in CORRECT_SUBMISSION, f"{CORPUS_FILE} no longer calls {_SOFTMAX}"
BUGGY_SUBMISSION = CORRECT_SUBMISSION.replace(
    _SOFTMAX, "(scores.exp() / scores.exp().sum(-1, keepdim=True))")


def step_grading(ctx: Context) -> list[Check]:
    """Grade a correct and a buggy submission with the device as the grader's device: the full
    sdpa suite (``grade_source``) and the GPU suite (float16/bfloat16 checks and timing)."""
    import time

    from grader.checks.gpu_suite import run_gpu_suite
    from grader.grading import grade_source
    from grader.sandbox import SandboxSession

    device = str(ctx.device)
    dtypes = (torch.float16, torch.bfloat16) if ctx.cuda else (torch.float32,)
    checks = []
    for label, source, correct in (("correct", CORRECT_SUBMISSION, True),
                                   ("buggy", BUGGY_SUBMISSION, False)):
        started = time.perf_counter()
        report = grade_source(source, "sdpa", seed=ctx.seed, device=device).to_dict()
        seconds = time.perf_counter() - started
        full = report["score"] == report["max_score"]
        failed = [c["id"] for c in report["checks"] if not c["passed"]]
        checks.append(Check(
            "grading", f"{label}: grade_source on {ctx.device.type}",
            "pass" if full == correct else "fail",
            f"{report['score']:g}/{report['max_score']:g} in {seconds:.1f} s"
            + (f", failed {', '.join(failed[:4])}" if failed else ""),
            "full marks" if correct else "less than full marks",
            data={"report": report, "seconds": seconds}))
        with SandboxSession(source, "scaled_dot_product_attention", device=device) as session:
            loaded = session.load()
            suite = run_gpu_suite(session, device, dtypes=dtypes, seed=ctx.seed) \
                if loaded.ok else []
        scored = [c for c in suite if c["max_points"] > 0]
        suite_ok = bool(scored) and all(c["passed"] for c in scored)
        expected = correct or not ctx.cuda  # float32 on the CPU cannot overflow like float16
        checks.append(Check(
            "grading", f"{label}: GPU suite ({', '.join(str(d).split('.')[-1] for d in dtypes)})",
            "pass" if suite_ok == expected else "fail",
            "; ".join(f"{c['id']} {'ok' if c['passed'] else 'FAIL'}" for c in scored)
            or "not loaded", "all pass" if expected else "a float16 check fails",
            data={"checks": suite}))
        timing = next((c for c in suite if c["id"] == "gpu.timing"), None)
        if timing is not None:
            checks.append(Check("grading", f"{label}: speed (0 points)", "info",
                                timing["message"].split(": ", 1)[-1], "reported only",
                                data=timing["details"]))
    return checks


STEPS: list[tuple[str, Callable[[Context], list[Check]]]] = [
    ("environment", step_environment),
    ("accuracy", step_accuracy),
    ("fully-masked", step_fully_masked),
    ("experiments", step_experiments),
    ("timing", step_timing),
    ("grading", step_grading),
]


def run_steps(ctx: Context, names: list[str]) -> list[Check]:
    checks = []
    for name, fn in STEPS:
        if name not in names:
            continue
        try:
            checks.extend(fn(ctx))
        except Exception as exc:  # one broken step must not hide the others
            checks.append(Check(name, "step raised", "fail", f"{type(exc).__name__}: {exc}",
                                data={"traceback": traceback.format_exc()}))
    return checks


def print_report(checks: list[Check]) -> None:
    from rich.console import Console
    from rich.table import Table

    colour = {"pass": "green", "fail": "bold red", "info": "cyan", "skip": "yellow"}
    table = Table(title="Reference attention on the device")
    for col in ("step", "check", "result", "measured", "limit"):
        table.add_column(col)
    for c in checks:
        status = f"[{colour[c.status]}]{c.status.upper()}"
        table.add_row(c.step, c.name, status, c.measured, c.limit)
    Console(width=max(Console().width, 120)).print(table)


def main(argv: list[str] | None = None) -> int:
    names = [name for name, _ in STEPS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default=",".join(names),
                        help=f"comma-separated steps to run (default all: {','.join(names)})")
    parser.add_argument("--device", default=None,
                        help="cuda or cpu (default: cuda when present, else cpu)")
    parser.add_argument("--quick", action="store_true", help="smaller shapes, shorter timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.environ.get("OUT"),
                        help="folder for gpu_check.json (default $OUT when set)")
    args = parser.parse_args(argv)
    wanted = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = sorted(set(wanted) - set(names))
    if unknown or not wanted:
        parser.error(f"unknown step(s) {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(names)}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda was asked for but CUDA is not available here")
    if device.type not in ("cuda", "cpu"):
        parser.error(f"--device must be cuda or cpu, got {args.device!r}")

    checks = run_steps(Context(device=device, quick=args.quick, seed=args.seed), wanted)
    print_report(checks)
    failed = [c for c in checks if c.status == "fail"]
    counts = {s: sum(c.status == s for c in checks) for s in ("pass", "fail", "info", "skip")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "gpu_check.json")
        with open(path, "w") as fh:
            json.dump({"device": str(device), "torch": torch.__version__, "passed": not failed,
                       "counts": counts, "checks": [asdict(c) for c in checks]}, fh, indent=2)
        print(f"wrote {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
