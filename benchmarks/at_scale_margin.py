"""How far ``grad.at_scale``'s budget sits from honest backwards and from numerical gradients.

    python benchmarks/at_scale_margin.py [--repeat 3] [--json OUT]

At the check's size (``grader/checks/at_scale.py``), on this machine and one thread: the CPU time of
every correct file of the sdpa_backward corpus (a backward by hand) and of every correct sdpa file's
forward plus autograd's backward, each as a fraction of the budget; and the time central finite
differences of a forward would need there (measured on one block of perturbations, scaled to the
589,824 forward passes), as a multiple of it. Both ratios are the same on any machine: the honest
side must stay far below 1, the numerical side far above it.
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from grader.checks.at_scale import BATCH, HEADS, LENGTH, SECONDS, WIDTH  # noqa: E402

SHAPE = (BATCH, HEADS, LENGTH, WIDTH)


def _load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cpu(fn, repeat: int) -> float:
    fn()  # first call: lazy imports, allocator
    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        fn()
        best = min(best, time.process_time() - began)
    return best


def honest(repeat: int) -> list[tuple[str, float]]:
    rows = []
    for path in sorted(glob.glob(os.path.join(ROOT, "grader/tasks/sdpa_backward/corpus/correct/*.py"))):
        fn = _load(path).scaled_dot_product_attention_backward
        args = [torch.randn(*SHAPE, dtype=torch.float64) for _ in range(4)]
        rows.append((os.path.relpath(path, ROOT), _cpu(lambda: fn(*args), repeat)))
    for path in sorted(glob.glob(os.path.join(ROOT, "grader/tasks/sdpa/corpus/correct/*.py"))):
        fn = _load(path).scaled_dot_product_attention
        leaves = [torch.randn(*SHAPE, dtype=torch.float64, requires_grad=True) for _ in range(3)]
        g = torch.randn(*SHAPE, dtype=torch.float64)
        rows.append((os.path.relpath(path, ROOT),
                     _cpu(lambda: torch.autograd.grad(fn(*leaves), leaves, g), repeat)))
    return rows


def numerical(repeat: int) -> float:
    """Seconds for central differences of a plain forward: one block of 512 one-hot moves, scaled."""
    q, k, v = (torch.randn(*SHAPE, dtype=torch.float64) for _ in range(3))
    block = 512
    moves = torch.zeros(block, *SHAPE, dtype=torch.float64)

    def forward(a, b, c):
        return torch.softmax(a @ b.transpose(-2, -1) / WIDTH ** 0.5, dim=-1) @ c

    def two_blocks():
        for sign in (1, -1):
            forward(q + sign * moves, k.expand(block, *SHAPE), v.expand(block, *SHAPE))
    return _cpu(two_blocks, repeat) * 3 * q.numel() / block


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = honest(args.repeat)
    fd = numerical(max(1, args.repeat // 3))
    print(f"grad.at_scale: B·H = {BATCH * HEADS}, L = S = {LENGTH}, E = Ev = {WIDTH}, budget {SECONDS:g} s")
    print(f"{'file':60s} {'CPU s':>8s} {'of budget':>10s}")
    for name, seconds in sorted(rows, key=lambda r: -r[1]):
        print(f"{name:60s} {seconds:8.3f} {seconds / SECONDS:10.3f}")
    print(f"{'finite differences of a plain forward (589,824 passes)':60s} {fd:8.0f} {fd / SECONDS:10.0f}x")
    worst = max(s for _, s in rows)
    print(f"margin: the slowest honest file uses {worst / SECONDS:.3f} of the budget; "
          f"differences need {fd / SECONDS:.0f} budgets")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"budget_s": SECONDS, "honest_s": dict(rows), "numerical_s": fd}, f, indent=1)
    return 0 if worst < SECONDS < fd else 1


if __name__ == "__main__":
    raise SystemExit(main())
