"""``attn-grader check``'s fast local level gives the server's verdicts for the same inputs.

The server grades with ``SANDBOX=auto`` (its default: the isolated zygote, or the strict
walls where bubblewrap is installed); the student's pre-check forks its children from a
warm process (``--sandbox local``). Every corpus file a student is likely to pre-check is
graded both ways with the public seed in tests/test_grader_corpus.py, beside the server's
gradings of the corpus; here: crashes and blocked imports, the default level, the refusal.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grader.commands import PUBLIC_SEED
from grader.grading import grade_source

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The speed check (0 points) measures time: its message differs between any two runs, its verdict not.
TIMED_CHECKS = ("speed.",)

CRASHES = '''import ctypes

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    print("about to crash")
    ctypes.string_at(0)  # a real segmentation fault
'''

EXITS = '''import os

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    os._exit(3)
'''

IMPORTS_THE_GRADER = '''import grader.grading

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    return query
'''


@pytest.mark.parametrize("source", [CRASHES, EXITS, IMPORTS_THE_GRADER],
                         ids=["segfault", "exit", "grader-import"])
def test_crashes_and_blocked_imports_read_the_same(source):
    local, server = (grade_source(source, "sdpa", seed=PUBLIC_SEED, sandbox=level).to_dict()
                     for level in ("local", "auto"))
    def strip(report):
        return [(c["id"], c["passed"], c["points"], "" if c["id"].startswith(TIMED_CHECKS) else c["message"])
                for c in report["checks"]]
    assert strip(local) == strip(server)
    assert local["score"] < 100


def test_the_check_command_runs_locally_by_default():
    path = os.path.join(os.path.dirname(HERE), "grader", "tasks", "sdpa", "corpus", "correct", "matmul_softmax.py")
    run = subprocess.run([sys.executable, "-m", "grader.cli", "check", path, "--task", "sdpa",
                          "--json"], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["sandbox"] == "local" and report["score"] == 100


def test_the_service_refuses_the_local_level(tmp_path):
    from web.config import load_config

    with pytest.raises(ValueError, match="SANDBOX='local'"):
        load_config({"SANDBOX": "local", "INSTANCE_PATH": str(tmp_path)}, environ={})
