"""Per-run control groups: the authoritative memory, process-count and kill-everything boundary.

What each run's cgroup caps is declared in ``policy`` (``cgroup_limits``); this module
finds the controllers, creates, joins and removes the cgroups.

rlimits are per process and miss shared memory (a ``MAP_SHARED`` bomb sails past
RLIMIT_DATA), and RLIMIT_NPROC is per uid; a cgroup caps the whole run and lets the
grader kill every process in it, however it forked. Works with cgroup v1 (the
``memory`` and ``pids`` controllers) and v2 (a delegated subtree with both enabled); the
``cpu`` controller, where the host has it, caps the run's CPU bandwidth too.
Runs are created under the grader's own cgroup, so they count against whatever
limit the grader's service already has.
"""
from __future__ import annotations

import itertools
import os
import signal
import threading
import time

from . import policy

_counter = itertools.count()
_lock = threading.Lock()


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork)


class CgroupUnavailable(RuntimeError):
    pass


def _mounts(mountinfo: str = "/proc/self/mountinfo") -> dict:
    """cgroup mounts by controller ("memory", "pids", or "unified" for v2)."""
    found = {}
    with open(mountinfo) as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if not rest or len(fields) < 5:
                continue
            fstype, mountpoint = rest[0], fields[4]
            if fstype == "cgroup2":
                found.setdefault("unified", mountpoint)
            elif fstype == "cgroup":
                for opt in rest[-1].split(","):
                    if opt in policy.CGROUP_REQUIRED + policy.CGROUP_OPTIONAL:
                        found.setdefault(opt, mountpoint)
    return found


def _own_paths(cgroup_file: str = "/proc/self/cgroup") -> dict:
    paths = {}
    with open(cgroup_file) as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else ["unified"]:
                paths[c] = path
    return paths


_detected: dict = {}


def detect(*, refresh: bool = False, mountinfo: str = "/proc/self/mountinfo",
           cgroup_file: str = "/proc/self/cgroup") -> tuple[str, dict]:
    """("v1" | "v2", {controller: base directory for our runs}); raises CgroupUnavailable.

    Cached per process (and per file pair, for tests); the first call also removes empty
    run cgroups left behind by grader processes that died.
    """
    key = (os.getpid(), mountinfo, cgroup_file)
    with _lock:
        if refresh or key not in _detected:
            _detected[key] = _detect(_mounts(mountinfo), _own_paths(cgroup_file))
            _remove_stale(_detected[key][1])
        return _detected[key]


def _detect(mounts: dict, own: dict) -> tuple[str, dict]:
    required, optional = policy.CGROUP_REQUIRED, policy.CGROUP_OPTIONAL
    if all(c in mounts for c in required):
        wanted = required + tuple(c for c in optional if c in mounts)
        bases = {c: os.path.join(mounts[c] + own.get(c, "/"), "attn-sandbox") for c in wanted}
        for c, base in bases.items():
            try:
                _ensure_dir(base)
            except CgroupUnavailable:
                if c in required:
                    raise
                del bases[c]
        return "v1", bases
    if "unified" in mounts:
        parent = mounts["unified"].rstrip("/") + own.get("unified", "/")
        try:
            with open(os.path.join(parent, "cgroup.controllers")) as f:
                available = f.read().split()
        except OSError:
            available = []
        if all(c in available for c in required):
            wanted = required + tuple(c for c in optional if c in available)
            base = os.path.join(parent, "attn-sandbox")
            _ensure_dir(base)
            try:
                wanted = _enable_controllers(parent, wanted)
            except CgroupUnavailable:
                # v2 forbids controllers below a cgroup that has processes ("no internal
                # processes"): as systemd's delegation docs advise, move ourselves to a leaf.
                leaf = os.path.join(parent, "attn-grader")
                _ensure_dir(leaf)
                _write(leaf, "cgroup.procs", os.getpid())
                wanted = _enable_controllers(parent, wanted)
            _enable_controllers(base, wanted)
            return "v2", {"unified": base}
    raise CgroupUnavailable("no usable memory and pids cgroup controllers (cgroup v1 needs both "
                            "mounted; v2 needs them delegated to the grader's cgroup)")


def _remove_stale(bases: dict) -> None:
    """Empty run cgroups of grader processes that no longer exist (killed before cleaning up)."""
    for base in bases.values():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if len(parts) == 3 and parts[0] == "run" and parts[1].isdigit() and not _alive(int(parts[1])):
                try:
                    os.rmdir(os.path.join(base, name))
                except OSError:
                    pass  # not empty: something still runs there; leave it to an operator


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ensure_dir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise CgroupUnavailable(f"cannot create {path}: {exc.strerror} (run as root or delegate "
                                "the cgroup subtree to the grader's user)") from None


def _enable_controllers(path: str, wanted: tuple) -> tuple:
    """Enable ``wanted`` below ``path``; without the optional ones if only they fail. What it enabled."""
    required = tuple(c for c in wanted if c in policy.CGROUP_REQUIRED)
    for attempt in dict.fromkeys((wanted, required)):
        try:
            with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
                f.write(" ".join("+" + c for c in attempt))
            return attempt
        except OSError as exc:
            error = exc
    raise CgroupUnavailable(f"cannot enable memory and pids in {path}: {error.strerror} (with v2 the "
                            "grader must run in a leaf of a delegated subtree)") from None


class RunCgroup:
    """One run's cgroup(s), capped as ``policy.cgroup_limits`` says. ``join_fds()`` gives the child
    something to write "0" into."""

    def __init__(self, version: str, bases: dict, limits: dict):
        self.version = version
        name = f"run-{os.getpid()}-{next(_counter)}"
        self.by_controller = {c: os.path.join(base, name) for c, base in bases.items()}
        self.dirs = list(self.by_controller.values())
        self.memory_bytes = limits["memory_bytes"]
        for d in self.dirs:
            os.mkdir(d, 0o700)
        cpu_quota = f"{int(limits['cpu_cores'] * policy.CPU_PERIOD_US)}"
        try:
            if version == "v1":
                mem, pids = self.by_controller["memory"], self.by_controller["pids"]
                _write(mem, "memory.limit_in_bytes", limits["memory_bytes"])
                # no swap escape
                _write(mem, "memory.memsw.limit_in_bytes", limits["memory_bytes"] + limits["swap_bytes"],
                       optional=True)
                _write(mem, "memory.swappiness", 0, optional=True)
                _write(pids, "pids.max", limits["pids"])
                if "cpu" in self.by_controller:
                    cpu = self.by_controller["cpu"]
                    _write(cpu, "cpu.cfs_period_us", policy.CPU_PERIOD_US)
                    _write(cpu, "cpu.cfs_quota_us", cpu_quota)
            else:
                (d,) = self.dirs
                _write(d, "memory.max", limits["memory_bytes"])
                _write(d, "memory.swap.max", limits["swap_bytes"], optional=True)
                _write(d, "pids.max", limits["pids"])
                if os.path.exists(os.path.join(d, "cpu.max")):
                    _write(d, "cpu.max", f"{cpu_quota} {policy.CPU_PERIOD_US}")
        except OSError:
            self.remove()
            raise

    def cpu_limited(self) -> bool:
        """Whether this run's CPU bandwidth is capped (the host has the cpu controller)."""
        return "cpu" in self.by_controller or os.path.exists(os.path.join(self.dirs[0], "cpu.max"))

    def join_fds(self) -> list[int]:
        return [os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]

    def pids(self) -> set[int]:
        found = set()
        for d in self.dirs:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    found.update(int(line) for line in f if line.strip())
            except (OSError, ValueError):
                pass
        return found

    def threads(self) -> set[int]:
        """Every thread of the run, as host ids (v1 lists them in ``tasks``, v2 in ``cgroup.threads``)."""
        name = "tasks" if self.version == "v1" else "cgroup.threads"
        try:
            with open(os.path.join(self.dirs[0], name)) as f:
                return {int(line) for line in f if line.strip()}
        except (OSError, ValueError):
            return set()

    def oom_killed(self) -> bool:
        """Did the kernel kill something in this run for exceeding the memory limit?"""
        name = "memory.oom_control" if self.version == "v1" else "memory.events"
        try:
            with open(os.path.join(self.dirs[0], name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
            if self.version == "v1":
                with open(os.path.join(self.dirs[0], "memory.failcnt")) as f:
                    return int(f.read()) > 0 and not self.pids()
        except (OSError, ValueError):
            pass
        return False

    def memory_limit_hits(self) -> int | None:
        """How often the run's charge has hit its memory limit (v1 ``memory.failcnt``, v2 the
        ``max`` count of ``memory.events``); None where it cannot be read."""
        try:
            if self.version == "v1":
                with open(os.path.join(self.dirs[0], "memory.failcnt")) as f:
                    return int(f.read())
            with open(os.path.join(self.dirs[0], "memory.events")) as f:
                return next((int(v) for k, _, v in (line.partition(" ") for line in f) if k == "max"), 0)
        except (OSError, ValueError):
            return None

    # -- memory as the kernel counts it, read by the parent (never by the child) ------------------
    def _read_int(self, name: str) -> int | None:
        try:
            with open(os.path.join(self.dirs[0], name)) as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def memory_usage(self) -> int | None:
        return self._read_int("memory.usage_in_bytes" if self.version == "v1" else "memory.current")

    def memory_peak(self) -> int | None:
        """The run's peak charge since it started or since the last successful ``reset_memory_peak``."""
        return self._read_int("memory.max_usage_in_bytes" if self.version == "v1" else "memory.peak")

    def reset_memory_peak(self) -> bool:
        """v1 resets on writing 0; v2's memory.peak is resettable from Linux 6.12 (False before)."""
        name = "memory.max_usage_in_bytes" if self.version == "v1" else "memory.peak"
        try:
            with open(os.path.join(self.dirs[0], name), "w") as f:
                f.write("0" if self.version == "v1" else "reset")
            return True
        except OSError:
            return False

    def fork_limit_hit(self) -> bool:
        path = os.path.join(self.by_controller.get("pids", self.dirs[0]), "pids.events")
        try:
            with open(path) as f:
                return any(line.split()[0] == "max" and int(line.split()[1]) > 0 for line in f)
        except (OSError, ValueError, IndexError):
            return False

    def signal_all(self) -> int:
        """One SIGKILL to every process of the run; how many there were."""
        if self.version == "v2":
            _write(self.dirs[0], "cgroup.kill", 1, optional=True)
        pids = self.pids()
        for pid in pids:
            _kill(pid)
        return len(pids)

    def kill(self, timeout: float = 5.0) -> bool:
        """SIGKILL everything in the run until it is empty (a fork bomb may race us once or twice)."""
        if self.version == "v2":
            _write(self.dirs[0], "cgroup.kill", 1, optional=True)
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                _kill(pid)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the run's directories (killing stragglers); False if one is still busy."""
        deadline = time.monotonic() + timeout
        gone = True
        for d in self.dirs:
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: an exiting task is still being torn down
                    if time.monotonic() > deadline:
                        gone = False
                        break
                    self.kill(0.5)
                    time.sleep(0.005)
        return gone

    def describe(self) -> str:
        """What still holds the run (for the log when it cannot be removed): pid, state, command."""
        held = []
        for pid in sorted(self.pids()):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
                comm, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
            except (OSError, ValueError, IndexError):
                comm, state = "?", "gone"
            held.append(f"{pid} {state} {comm}")
        return f"{self.dirs[0]}: " + (", ".join(held) if held else "no processes listed")


def _kill(pid: int) -> None:
    """SIGKILL, then the highest CPU priority: a killed task still needs the CPU to exit, and on a
    host loaded with other gradings 30 dying fork-bomb processes took 2-8 s to go (a test of
    containment read them as survivors). Raised only after the kill, so nothing it could still
    fork inherits the priority; where the grader may not raise it (no root), the kill alone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, pid, -20)
    except OSError:
        pass


def _write(directory: str, name: str, value, optional: bool = False) -> None:
    try:
        with open(os.path.join(directory, name), "w") as f:
            f.write(str(value))
    except OSError:
        if not optional:
            raise


def leftover_runs() -> list[str]:
    """Run cgroups of this process still present (tests assert there are none)."""
    try:
        _, bases = detect()
    except CgroupUnavailable:
        return []
    prefix = f"run-{os.getpid()}-"
    return [os.path.join(b, n) for b in bases.values() for n in os.listdir(b) if n.startswith(prefix)]
