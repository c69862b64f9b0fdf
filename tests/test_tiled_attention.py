"""The tiled_attention task: its blocked reference, its bugs, and memory measured from the cgroup."""
import pytest
import torch

from grader.checks import tiled
from grader.grading import grade_source
from grader.sandbox import cgroups
from reference_impl import scaled_dot_product_attention

ONLINE = open(__file__.replace("test_tiled_attention.py", "corpus/tiled_attention/correct/online_loop.py")).read()
FULL = open(__file__.replace("test_tiled_attention.py", "corpus/tiled_attention/buggy/full_score_matrix.py")).read()


def _has_cgroup():
    try:
        cgroups.detect()
        return True
    except Exception:
        return False


@pytest.mark.parametrize("block", [1, 4, 7, 19, 40])
def test_the_blocked_algorithm_is_attention_and_each_bug_is_not(block):
    g = torch.Generator().manual_seed(block)
    q, k, v = (torch.randn(2, 5, s, e, generator=g, dtype=torch.float64) for s, e in ((6, 8), (19, 8), (19, 3)))
    ref = scaled_dot_product_attention(q, k, v)
    assert torch.allclose(tiled.online(q, k, v, block), ref, atol=1e-12)
    if block not in (4, 7):  # the bugs need several blocks and a partial last one: S = 19
        return
    for bug in set(tiled.BUGS) - {"max_not_subtracted", "float32_accumulators"}:  # those two: in float32 only
        assert not torch.allclose(tiled.online(q, k, v, block, bug), ref, atol=1e-6), (bug, block)


def test_without_a_cgroup_the_memory_is_reported_as_not_measured():
    report = grade_source(ONLINE, "tiled_attention", seed=5, sandbox="none")
    memory = next(c for c in report.checks if c.id == "memory.long_sequence")
    assert memory.passed and memory.details == {"measured": False} and "not measured" in memory.message
    assert report.score == 100


@pytest.mark.skipif(not _has_cgroup(), reason="no delegated cgroup here: the sandbox cannot measure memory")
def test_the_parent_measures_a_full_score_matrix_from_the_cgroup():
    full = grade_source(FULL, "tiled_attention", seed=5, sandbox="strict")
    memory = next(c for c in full.checks if c.id == "memory.long_sequence")
    assert not memory.passed and memory.details["measured"] and memory.details["peak_mib"] >= 256
    tiled_report = grade_source(ONLINE, "tiled_attention", seed=5, sandbox="strict")
    memory = next(c for c in tiled_report.checks if c.id == "memory.long_sequence")
    assert memory.passed and memory.details["peak_mib"] < 256
