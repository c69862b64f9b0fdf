"""``speed.relative`` (reported only) gives a file the same verdict on an idle and a fully loaded
machine, and advises vectorising only code whose cost grows like a Python loop (grader/checks/speed.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.commands import PUBLIC_SEED
from grader.grading import grade_source

CORPUS = Path(__file__).resolve().parent.parent / "grader" / "tasks" / "sdpa" / "corpus"
FILES = {  # file -> whether its cost grows like a loop
    CORPUS / "correct" / "matmul_softmax.py": False,    # the textbook two matmuls and a softmax
    CORPUS / "correct" / "loop_rows.py": True,          # one query row at a time
}
BATCH_LOOP = '''import math
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    rows = [torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v for q, k, v in zip(query, key, value)]
    return torch.stack(rows)
'''


def _speed(source: str) -> dict:
    report = grade_source(source, "sdpa", seed=PUBLIC_SEED, sandbox="local", only="speed.relative").to_dict()
    return next(c for c in report["checks"] if c["id"] == "speed.relative")


@pytest.fixture(scope="module")
def sources():
    return {**{path.name: path.read_text() for path in FILES}, "batch_loop.py": BATCH_LOOP}


def test_the_same_verdict_idle_and_with_both_cores_busy(sources):
    idle = {name: _speed(source) for name, source in sources.items()}
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:  # one file of each verdict again, with every core busy
        busy = {name: _speed(sources[name]) for name in ("matmul_softmax.py", "loop_rows.py")}
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    for name in busy:
        assert idle[name]["passed"] == busy[name]["passed"], (name, idle[name]["details"], busy[name]["details"])
        assert idle[name]["points"] == busy[name]["points"] == 0 == idle[name]["max_points"]
    looped = {name for name, check in idle.items() if not check["passed"]}
    assert looped == {"loop_rows.py", "batch_loop.py"}, {n: c["details"] for n, c in idle.items()}
    assert "Python loop over the queries or the keys" in idle["loop_rows.py"]["message"]
    assert "Python loop over the batch or the heads" in idle["batch_loop.py"]["message"]
    textbook = idle["matmul_softmax.py"]
    assert "vectoris" not in textbook["message"].replace("as vectorised code does", "")
    assert textbook["details"]["clock"] == "cpu" and textbook["details"]["seconds"] > 0
