"""How long a child sat ready to run with no core free: time its limits do not charge.

A call's time limit is a bound on the student's code, not on the machine's load: the same
function must meet it, or miss it, whether the host is idle or grading ten files at once
(the same code gets the same score). Linux counts, for every thread, the time it spent
runnable on a run queue waiting for a CPU (the second field of ``/proc/<tid>/schedstat``, in
ns). The session reads it for the child's threads around each request, extends the request's
deadline by what the child waited, and charges the submission's time budgets with the wall
time minus that wait (``session.py``). A child that sleeps or blocks waits on no run queue, so
a hung call still ends at its limit; how far load may stretch one is ``policy.LOAD_STRETCH``.

Which threads: a strict child's whole cgroup (everything the run started: the parent reads
the host's thread ids from the cgroup), otherwise the child process's own threads.
"""
from __future__ import annotations

import os
import time


def _schedstat(tid: int) -> tuple[int, int] | None:
    """(ns on a CPU, ns waiting on a run queue) of one thread."""
    try:
        with open(f"/proc/{tid}/schedstat", "rb") as f:
            run, delay = f.read().split()[:2]
        return int(run), int(delay)
    except (OSError, ValueError):  # the thread ended, or no schedstat in this kernel
        return None


def child_threads(child) -> list[int]:
    """The host thread ids of ``child``'s run (empty where they cannot be read)."""
    cgroup = getattr(child, "cgroup", None)
    if cgroup is not None:
        return list(cgroup.threads())
    pid = getattr(child, "pid", None)
    if not pid:
        return []
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []


class WaitClock:
    """Started around one request: ``waited()`` is how long the child was kept from running by
    other programs since then.

    That is the longest any of its threads waited on a run queue (a thread born later counts from
    its birth), but never more than the wall time its threads together did not fill at the run's
    cores: a run that keeps its own cores busy (a fork bomb, more threads than cores) waits for
    itself, and that is charged to it.
    """

    def __init__(self, child):
        self.child, self.began = child, time.monotonic()
        self.cores = max(1, int(getattr(child, "threads", 1)))
        self.start = {t: st for t in child_threads(child) if (st := _schedstat(t)) is not None}
        self.most = 0.0  # seconds: what ``waited()`` last found (read it when the child is gone)

    def cpu(self) -> float | None:
        """Seconds the child's threads ran on a CPU since the clock started (None where the kernel
        does not say): the call's own cost, whatever else the host runs meanwhile."""
        threads = child_threads(self.child)
        if not threads:
            return None
        ran, seen = 0, False
        for t in threads:
            now = _schedstat(t)
            if now is not None:
                seen = True
                ran += max(0, now[0] - self.start.get(t, (0, 0))[0])
        return ran / 1e9 if seen else None

    def waited(self) -> float:
        ran = delayed = 0
        for t in child_threads(self.child):
            now = _schedstat(t)
            if now is None:
                continue
            run0, delay0 = self.start.get(t, (0, 0))
            ran += max(0, now[0] - run0)
            delayed = max(delayed, now[1] - delay0)
        idle_cores = time.monotonic() - self.began - ran / 1e9 / self.cores
        self.most = max(self.most, min(delayed / 1e9, max(0.0, idle_cores)))
        return self.most
