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
    # vectorised, but in float16, which a CPU computes more slowly per element: heavier, not a loop
    CORPUS / "buggy" / "float16_cast_back.py": False,
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
    try:  # one file of each verdict, and the heavier vectorised one, again with every core busy
        busy = {name: _speed(sources[name]) for name in ("matmul_softmax.py", "loop_rows.py", "float16_cast_back.py")}
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


PADDED_ROW_LOOP = '''import math
import time

import torch


def _steady_clock():
    # every reading of the harness's clock burns the same work: the tiny call costs what a long one does
    total = 0
    for i in range(400_000):
        total += i
    return 0.0


time.perf_counter = _steady_clock


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    rows = []
    for i in range(query.size(-2)):  # one query row at a time
        s = (query[..., i:i + 1, :] @ key.transpose(-1, -2)) * scale
        if is_causal:
            s = s.masked_fill(torch.arange(key.size(-2)) > i, float("-inf"))
        if attn_mask is not None:
            m = attn_mask[..., i:i + 1, :]
            s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
        rows.append(torch.softmax(s, -1) @ value)
    return torch.cat(rows, dim=-2)
'''


def test_a_row_loop_under_a_steady_per_call_cost_is_still_named():
    """Replacing ``time.perf_counter`` in the child with something slow makes every call, the tiny
    one included, cost the same extra: the growth ratio falls, the loop's extra time does not. The
    verdict rests on the parent's reading of the child's CPU time, never on the child's clock."""
    check = _speed(PADDED_ROW_LOOP)
    assert not check["passed"] and check["details"]["clock"] == "cpu", check["details"]
    # the rows are named; the heads may be named too: in the child, under this clock, the call
    # on 128 heads measured up to 22 ms over the tiny one (the function alone: 0.1 ms) and the
    # verdict rests on what is measured, not on what the source looks like
    assert "with 128 queries and keys instead of 4" in check["message"], check["message"]
    assert "steady" in check["message"], check["message"]

