"""The prepared check of the GPU sandbox path, for when a GPU machine is lent.

    python benchmarks/gpu_sandbox_check.py [--device cuda] [-n 5] [--out DIR]

On a GPU, children are pre-warmed single-use workers (forked by the zygote before CUDA exists
anywhere, walled in, CUDA initialised inside the walls, the submission handed over the pipe).
Steps, each a PASS/FAIL line:

- ``environment``: torch, CUDA, the device nodes, and whether ``strict`` is available.
- ``correct``: a correct submission runs on the device inside ``strict`` and matches the
  reference; its output comes back from ``cuda``.
- ``walls``: inside, the worker sees CUDA but only the GPU nodes plus five basic ones in
  /dev, runs as a slot uid without capabilities, under seccomp, with no network.
- ``grade``: the full ``grade_source(..., sandbox="strict", device=...)`` scores 100 %.
- ``gpu-memory-bomb``, ``gpu-endless-kernel``: contained (an error or a timeout), and the
  worker's GPU context is gone afterwards (``nvidia-smi`` lists no process of it).
- ``latency``: median time of a strict GPU session (take a warm worker, load, one call,
  close) next to a fresh ``python -c "import torch; torch.cuda.init()"``.

Without CUDA it says so and runs the same steps on the CPU through pre-warmed workers
(``grader.sandbox.pool.prewarm_cpu``), so the script itself can be smoke-tested anywhere.
Writes ``gpu_sandbox_check.json`` to ``--out`` or ``$OUT``; exits 1 when a step fails.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FN = "scaled_dot_product_attention"
CORRECT = open(os.path.join(ROOT, "tests", "hostile", "correct.py")).read()
PROBE = '''
import os, socket, torch
def scaled_dot_product_attention(q, k, v, *a, **kw):
    st = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=1)
        net = "CONNECTED"
    except OSError as exc:
        net = str(exc)
    print(repr({"cuda": torch.cuda.is_available(), "dev": sorted(os.listdir("/dev")), "uid": os.getuid(),
                "cap": st["CapEff"].strip(), "seccomp": st["Seccomp"].strip(), "net": net}))
    return q
'''
BOMB = ("import torch\ndef scaled_dot_product_attention(q, k, v, *a, **kw):\n"
        "    hoard = []\n    while True:\n        hoard.append(torch.empty(1 << 30, device=q.device))\n")
ENDLESS = ("import torch\ndef scaled_dot_product_attention(q, k, v, *a, **kw):\n"
           "    x = torch.randn(2048, 2048, device=q.device)\n    while True:\n        x = (x @ x).tanh()\n")


def gpu_pids() -> set[str]:
    if not shutil.which("nvidia-smi"):
        return set()
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("-n", type=int, default=5)
    parser.add_argument("--out", default=os.environ.get("OUT"))
    args = parser.parse_args()

    import torch
    from grader.grading import grade_source
    from grader.sandbox import Limits, SandboxSession, forkserver
    from grader.sandbox.wall import strict_problems

    device = args.device if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        print("no CUDA device: running the steps on the CPU through pre-warmed workers (smoke test)")
        from grader.sandbox.pool import prewarm_cpu
        prewarm_cpu(True)
    limits = Limits(wall_seconds=30, call_seconds=10, load_seconds=60, cpu_seconds=30)
    results, ok = {}, True
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 32, generator=g) for _ in range(3))  # (B, H, L, E)
    want = torch.softmax(q.double() @ k.double().transpose(-2, -1) / 32 ** 0.5, -1) @ v.double()

    def step(name):
        def wrap(fn):
            nonlocal ok
            start = time.perf_counter()
            try:
                detail = fn()
                passed = True
            except Exception as exc:  # noqa: BLE001 - every failure is reported, then the next step
                detail, passed = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}", False
            ok = ok and passed
            results[name] = {"passed": passed, "detail": detail, "seconds": round(time.perf_counter() - start, 3)}
            print(f"{'PASS' if passed else 'FAIL'}  {name:<20} {str(detail)[:300]}")
        return wrap

    @step("environment")
    def _():
        problems = strict_problems()
        assert not problems, problems
        return {"torch": torch.__version__, "cuda": torch.version.cuda, "device": device,
                "name": torch.cuda.get_device_name() if device != "cpu" else "cpu",
                "nodes": glob.glob("/dev/nvidia*")}

    @step("correct")
    def _():
        with SandboxSession(CORRECT, FN, level="strict", limits=limits, device=device) as s:
            r = s.call(q, k, v)
        assert r.ok, r.error
        assert r.output_device.split(":")[0] == device.split(":")[0], r.output_device
        err = (r.output.double() - want).abs().max().item()
        assert err < 1e-3, err
        return {"max_error": err, "output_device": r.output_device}

    @step("walls")
    def _():
        with SandboxSession(PROBE, FN, level="strict", limits=limits, device=device) as s:
            r = s.call(q, k, v)
            out = s.stdout
        assert r.ok, r.error
        info = eval(out.strip().splitlines()[-1])  # our own probe's repr of plain literals
        basic = {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr"}
        assert set(info["dev"]) - basic <= {n for n in os.listdir("/dev") if n.startswith("nvidia")}, info["dev"]
        assert info["cuda"] == (device != "cpu") and info["uid"] >= forkserver.UID_BASE, info
        assert info["cap"] == "0000000000000000" and info["seccomp"] == "2" and "CONNECTED" not in info["net"]
        return info

    @step("grade")
    def _():
        report = grade_source(CORRECT, "sdpa", sandbox="strict", device=device, seed=1, limits=limits)
        assert report.score == report.max_score, [c.message for c in report.checks if not c.passed]
        return {"score": report.score, "timings": report.timings}

    for name, src in (("gpu-memory-bomb", BOMB), ("gpu-endless-kernel", ENDLESS)):
        @step(name)
        def _(src=src):
            before = gpu_pids()
            short = Limits(wall_seconds=20, call_seconds=8, load_seconds=60, cpu_seconds=15)
            with SandboxSession(src, FN, level="strict", limits=short, device=device) as s:
                r = s.call(q, k, v)
            assert not r.ok, "the attack returned a result"
            forkserver.drain()
            time.sleep(1.0)
            leftover = gpu_pids() - before
            assert not leftover, f"GPU processes left: {leftover}"
            return {"error": f"{r.error.kind}: {r.error.message[:200]}"}

    @step("latency")
    def _():
        times = []
        for _ in range(args.n):
            start = time.perf_counter()
            with SandboxSession(CORRECT, FN, level="strict", limits=limits, device=device) as s:
                assert s.call(q, k, v).ok
            times.append(time.perf_counter() - start)
            time.sleep(0.5 if device == "cpu" else 3.0)  # let the pool pre-warm the next worker
        init = "import torch; torch.cuda.init()" if device != "cpu" else "import torch"
        fresh = []
        for _ in range(max(2, args.n // 2)):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", init], check=True)
            fresh.append(time.perf_counter() - start)
        return {"strict_session_median_s": round(statistics.median(times), 4),
                "fresh_interpreter_median_s": round(statistics.median(fresh), 4)}

    forkserver.shutdown()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "gpu_sandbox_check.json"), "w") as f:
            json.dump(results, f, indent=2, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
