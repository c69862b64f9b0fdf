"""How many torch threads one grading worker process may use.

A worker's own torch work (inputs, float64 references, comparisons) runs in the worker
process; the student's function runs in a sandboxed child pinned to one thread. With the
default intra-op pool (one thread per core) in every worker, N workers on a host run N x
cores threads and spend their time fighting over the cores: on a 2-core machine two workers
graded each submission 4x slower than one grading alone. So each worker gets its share of
the cores this process may run on (``os.sched_getaffinity``), at least one.
"""
from __future__ import annotations

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def usable_cores() -> int:
    """Cores this process may run on (a cgroup/taskset restriction counts, unlike cpu_count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def threads_per_worker(setting: int, workers: int, cores: int | None = None) -> int:
    """``setting`` if positive, else the worker's share of the usable cores (at least 1)."""
    if setting < 0:
        raise ValueError(f"ATTN_GRADER_TORCH_THREADS={setting}: expected 0 (automatic) or a "
                         "positive number of threads")
    if setting:
        return setting
    cores = usable_cores() if cores is None else cores
    return max(1, cores // max(1, workers))


def thread_environment(threads: int) -> dict:
    """Environment for a worker process: the thread pools start at this size."""
    return {var: str(threads) for var in THREAD_VARIABLES}


def apply_threads(threads: int) -> None:
    """Limit this process's torch pools; before ``import torch`` the variables do it."""
    os.environ.update(thread_environment(threads))
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
