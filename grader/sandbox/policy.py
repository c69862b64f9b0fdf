"""The sandbox policy, as data: everything a submission can touch, in one file.

Every layer that applies the sandbox reads its values from here and nowhere else:
``wall.py`` (the outer bubblewrap argv), ``zygote.py`` + ``isolate.py`` (each child's
namespaces, root, rlimits, seccomp), ``forkserver.py`` and ``backends.py`` (the request
and the environment), ``cgroups.py`` (the run's cgroup limits) and ``runs.py`` (uids).
``attn-grader sandbox policy`` prints it (see :func:`describe`).

Loaded by path inside the zygote (never as part of the ``grader`` package), so it
imports only the standard library. The numbers come from the design study
(../shared/research/sandbox-study.md) unless a comment says otherwise; those an operator may
change (the run's limits, the uid range, the seccomp mode) are declared with every other
setting in ``grader/settings.py`` and read through it, in the grading process only.
"""
from __future__ import annotations

import errno
import os
import socket
from dataclasses import asdict, dataclass, field

GiB, MiB, KiB = 1 << 30, 1 << 20, 1 << 10

# -- resource limits: one submission's run -----------------------------------------------------
# The numbers are operator settings, declared (default, meaning) in grader/settings.py as
# ATTN_GRADER_SANDBOX_<NAME>; `attn-grader sandbox policy` prints the values in force.


def _setting(name: str):
    """The operator's ``ATTN_GRADER_<name>``, through the settings registry. Only a grading
    process calls this (building ``Limits``, choosing a filter, the uid range): the zygote and
    the harness load this file by path without the grader package, and their environment
    holds none of the grader's settings."""
    from grader.settings import value
    return value(name)


def _limit(name: str):
    return field(default_factory=lambda: _setting("SANDBOX_" + name))


@dataclass
class Limits:
    """One submission's run; each field not given is ``ATTN_GRADER_SANDBOX_<FIELD>`` (or its
    declared default), read when a ``Limits`` is created."""

    memory_bytes: int = _limit("MEMORY_BYTES")      # cgroup memory (all processes) + RLIMIT_DATA
    cpu_seconds: int = _limit("CPU_SECONDS")        # RLIMIT_CPU per process, soft = hard (SIGKILL)
    wall_seconds: float = _limit("WALL_SECONDS")    # the whole session
    call_seconds: float = _limit("CALL_SECONDS")    # one request; a hung call costs this much
    load_seconds: float = _limit("LOAD_SECONDS")    # import of the student file (cold: torch too)
    processes: int = _limit("PROCESSES")            # cgroup pids.max and RLIMIT_NPROC
    file_size: int = _limit("FILE_SIZE")            # RLIMIT_FSIZE
    tmp_size: int = _limit("TMP_SIZE")              # the child's private /tmp (tmpfs)
    open_files: int = _limit("OPEN_FILES")          # RLIMIT_NOFILE
    output_bytes: int = _limit("OUTPUT_BYTES")      # stdout and stderr kept, each


# The limits above count the child's own time: the time its threads waited for a free core
# (another grading's load) is added back to a deadline (``waiting.py``), so the same code meets or
# misses a limit on an idle or a busy host alike. At most this many times the limit in wall time,
# so a host overloaded past reason still ends every call.
LOAD_STRETCH = 4


def rlimits(limits: Limits, device: str = "cpu", *, memory_cgroup: bool = False) -> dict:
    """The rlimits of a child, by name (see ``RLIMIT_NAMES``); soft = hard, so a CPU overrun is a
    SIGKILL, not a SIGXCPU the student can catch. ``None`` = left as inherited."""
    # CUDA reserves huge private mappings: under a memory cgroup, that caps memory instead.
    data = None if device.startswith("cuda") and memory_cgroup else limits.memory_bytes
    return {"cpu": int(limits.cpu_seconds), "data": data, "fsize": limits.file_size,
            "nofile": limits.open_files, "nproc": limits.processes, "core": 0}


RLIMIT_NAMES = {"cpu": "RLIMIT_CPU", "data": "RLIMIT_DATA", "fsize": "RLIMIT_FSIZE",
                "nofile": "RLIMIT_NOFILE", "nproc": "RLIMIT_NPROC", "core": "RLIMIT_CORE"}


def cgroup_limits(limits: Limits, threads: int = 1) -> dict:
    """What the run's cgroup caps, for all of its processes together (the authoritative bound:
    rlimits miss shared memory and are per process). ``cpu_cores`` applies where the host has the
    cpu controller: the run gets the cores its thread count asks for, and no more."""
    return {"memory_bytes": limits.memory_bytes, "swap_bytes": 0, "pids": limits.processes,
            "cpu_cores": max(1, int(threads))}


CGROUP_REQUIRED = ("memory", "pids")   # strict refuses without them
CGROUP_OPTIONAL = ("cpu",)             # used where present
CPU_PERIOD_US = 100_000                # the CFS period the CPU quota is a multiple of

# -- identities ------------------------------------------------------------------------------
# Each run gets its own uid (no passwd entry needed), held by an flock across grader processes.


def uid_slots() -> tuple[int, int]:
    """(first uid, how many): ATTN_GRADER_SANDBOX_UID_BASE and _UID_SLOTS (``runs.py`` reads
    them once per process: a slot's lock file is named by its number)."""
    return _setting("SANDBOX_UID_BASE"), _setting("SANDBOX_UID_SLOTS")


# -- namespaces ------------------------------------------------------------------------------
# The outer wall (bwrap) around the zygote; bwrap always has its own mount namespace.
WALL_NAMESPACES = ("pid", "net", "ipc", "uts", "cgroup")
# Each child; no user namespace: the root zygote gives it a per-run uid instead.
CHILD_NAMESPACES = ("mnt", "pid", "net", "ipc", "uts", "cgroup")
HOSTNAME = "sandbox"
# The capabilities bwrap leaves the zygote (all others dropped), to build per-child namespaces,
# mounts and uids. CAP_KILL: the parent-death signal is a signal from the dying waiter (uid 0) to
# the slot uid, and without it the kernel drops it silently, leaving an orphaned child (measured).
WALL_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_KILL")

# -- filesystem view -------------------------------------------------------------------------
# Read-only: the OS trees, plus the interpreter, venv and packages (``wall.python_roots()``,
# computed on the host; never the repository). Top-level symlinks (/lib -> usr/lib) are re-created.
OS_TREES = ("/usr",)
OS_TOP_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PYTHON_PACKAGES = ("torch", "numpy", "pyseccomp")  # wherever these live is bound too
WALL_ETC_BINDS = ("/etc/ld.so.cache",)  # pyseccomp's find_library needs it (P8)
WALL_ROOT_DIR = "/.attn-root"       # an empty mount point the zygote builds children's roots on
ROOT_CANDIDATES = (WALL_ROOT_DIR, "/mnt", "/media", "/srv", "/opt", "/tmp")
ROOT_TMPFS = "size=4m,mode=755"     # the child's root: mount points and the synthetic /etc
DEV_TMPFS = "size=64k,mode=755"     # noexec
DEV_NODES = ("null", "zero", "full", "random", "urandom")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2"}
TMP_MODE = "1777"                   # size: Limits.tmp_size; nosuid, nodev; fresh for every run
# torch's own package directories (torch, functorch) are hidden under an empty read-only tmpfs:
# the zygote imported what grading needs before, and a child must not read torch's Python source
# or bytecode (executing torch's attention code from its files; see seal.py).
SEALED_PACKAGES = ("torch", "functorch")
SEALED_TMPFS = "size=4k,mode=755"
SEALED_KEEP = ("lib",)  # bound back, read-only: the shared libraries (their code is trapped in memory)
# Public torch modules nothing imports by default that a submission may import for itself.
PRELOADED_TORCH_MODULES = ("torch.testing", "torch.utils.checkpoint", "torch.autograd.functional",
                           "torch.nn.init", "torch.nn.utils", "torch.special", "torch.fft", "torch.linalg",
                           "torch.func", "torch.overrides", "torch.utils.data", "torch.distributions",
                           # imported by the indexing of any tensor subclass (tiled_attention's streamed keys)
                           "torch.distributed.tensor")
SUBMISSION_DIR = "/sub"             # the student's files, read-only, noexec
SUBMISSION_TMPFS = "size=16m,mode=755"
SUBMISSION_FILE_BYTES = 16 * MiB    # each file, refused above
SUBMISSION_FILES = 8                # at most this many files are handed over
PROC_MOUNT = "/proc"                # the child's own pid namespace only; nosuid, nodev, noexec
# /proc files that are host-wide whatever the pid namespace: they would show the host's load,
# memory, uptime and disks. Each gets a synthetic file bound over it (as LXCFS and nsjail do),
# describing the run instead. The child's own mount table (pid 1's, also /proc/mounts) is emptied:
# it names host devices and the host paths its binds come from.
MASKED_PROC_FILES = ("loadavg", "meminfo", "stat", "uptime", "swaps", "vmstat", "diskstats",
                     "partitions", "1/mounts", "1/mountinfo", "1/mountstats")


def masked_proc_files(memory_bytes: int, cpus) -> dict:
    """Their contents for one run: its memory limit as the machine's memory, its CPUs idle, no
    load, no disks, no mounts. ``cpus``: the CPU numbers the child may run on."""
    kib = memory_bytes // KiB
    meminfo = "".join(f"{name + ':':<16}{value:>8} kB\n" for name, value in (
        ("MemTotal", kib), ("MemFree", kib), ("MemAvailable", kib), ("Buffers", 0), ("Cached", 0),
        ("SwapCached", 0), ("SwapTotal", 0), ("SwapFree", 0), ("Shmem", 0)))
    idle = " 0 0 0 0 0 0 0 0 0 0\n"
    stat = ("cpu " + idle + "".join(f"cpu{n}{idle}" for n in sorted(cpus))
            + "intr 0\nctxt 0\nbtime 0\nprocesses 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0\n")
    files = {"loadavg": "0.00 0.00 0.00 1/1 1\n", "meminfo": meminfo, "stat": stat, "uptime": "0.00 0.00\n",
             "swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n", "vmstat": "",
             "diskstats": "", "partitions": "major minor  #blocks  name\n\n"}
    files.update({name: "" for name in MASKED_PROC_FILES if name not in files})
    return files


def etc_files(uid: int) -> dict:
    """The child's synthetic /etc: getpass/pwd work, nothing of the host's leaks (P8).
    ``ld.so.cache`` is added as a copy of the host's (a bind breaks when ldconfig replaces it)."""
    return {"passwd": f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
                      f"student:x:{uid}:{uid}:student:/tmp:/usr/sbin/nologin\n",
            "group": f"root:x:0:\nstudent:x:{uid}:\n",
            "hosts": "127.0.0.1 localhost\n::1 localhost\n",
            "hostname": HOSTNAME + "\n"}


# GPU runs only: these nodes are dev-bound (a plain bind is nodev and NVML fails) and /sys is
# bound read-only (cuInit returns 304 without it).
GPU_NODE_PREFIX = "/dev/nvidia"
GPU_SYS = "/sys"

# -- environment -----------------------------------------------------------------------------
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0"}
CHILD_ENV = {"HOME": "/tmp", "TMPDIR": "/tmp", "USER": "student", "LOGNAME": "student"}
PASSED_THROUGH = ("CUDA_VISIBLE_DEVICES",)  # from the grader's environment, for GPU runs only


def _passed_through() -> dict:
    return {var: os.environ[var] for var in PASSED_THROUGH if var in os.environ}


def zygote_env() -> dict:
    """The fork server's environment: single-threaded when it forks (P3)."""
    return {**BASE_ENV, **{var: "1" for var in THREAD_VARS}, **_passed_through()}


def child_env(device: str, threads: int = 1) -> dict:
    """A submission's whole environment: nothing of the grader's (secrets included) leaks in."""
    env = {**BASE_ENV, **CHILD_ENV, **{var: str(threads) for var in THREAD_VARS}}
    if device.startswith("cuda"):
        env.update(_passed_through())
    return env


# -- seccomp ---------------------------------------------------------------------------------
# Two filters; ATTN_GRADER_SANDBOX_SECCOMP chooses (see ``seccomp_mode``):
# - "allow-list" (the default for CPU runs): only SECCOMP_ALLOWED (and the argument rules below),
#   measured from what grading runs actually call (``benchmarks/seccomp_syscalls.py``); any other
#   call fails with ENOSYS, as if this kernel lacked it: glibc then falls back to an older call
#   where it has one (clone3 -> clone, statx -> newfstatat), which EPERM would turn into an error;
# - "deny-list": allow-all except SECCOMP_DENIED. GPU runs keep it (CUDA needs many ioctls, device
#   mmaps and threads, and no GPU run has been measured yet: see SECCOMP_ALLOWED_GPU);
# - "log": the allow-list, but anything outside it is allowed and logged by the kernel (dmesg,
#   "audit: type=1326 ... syscall=N"): how the list is measured, never for grading.
SECCOMP_MODES = ("allow-list", "deny-list", "log")  # the zygote compiles each; the setting's choices
SECCOMP_REFUSED_ERRNO = errno.ENOSYS  # what a call outside the allow-list returns


def seccomp_mode(device: str = "cpu") -> str:
    """The filter a child on ``device`` gets, from ATTN_GRADER_SANDBOX_SECCOMP (read per run)."""
    mode = _setting("SANDBOX_SECCOMP")  # default allow-list; a value outside SECCOMP_MODES is refused
    if device.startswith("cuda") and not SECCOMP_ALLOWED_GPU:
        return "deny-list"
    return mode


# After the filter is loaded, a child only serves the harness: reads and writes its pipes, imports
# the student's file (already-imported torch and numpy need no more files), computes, maybe
# prints, sleeps, starts threads or forks (the pids cgroup caps that), and exits. The names are
# x86_64's; one this architecture lacks is skipped.
SECCOMP_ALLOWED = (
    # files and descriptors (only /tmp is writable; everything else is read-only or absent)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "close", "close_range",
    "open", "openat", "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
    "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents64", "getcwd", "chdir",
    "fchdir", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "flock", "fadvise64", "ftruncate",
    "fsync", "fdatasync", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
    "renameat2", "chmod", "fchmod", "fchmodat", "umask", "utimensat", "sendfile", "copy_file_range",
    "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
    "eventfd2",
    # memory (mmap and mprotect: without PROT_EXEC only, see below)
    "brk", "munmap", "mremap", "madvise", "mbind", "get_mempolicy", "membarrier",
    # threads and processes (clone: without namespace flags, see below)
    "exit", "exit_group", "wait4", "waitid", "kill", "tgkill", "tkill", "getpid", "getppid", "gettid",
    "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid", "getresgid", "getpgrp",
    "getpgid", "getsid", "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "getpriority", "prlimit64", "getrlimit",
    "getrusage", "times", "sysinfo", "uname", "arch_prctl", "capget",
    # signals and time
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_sigpending", "sigaltstack", "restart_syscall", "alarm", "setitimer", "getitimer", "pause",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "getrandom",
    # Unix sockets only (socket and socketpair: AF_UNIX, see below; there is no network anyway)
    "connect", "bind", "listen", "accept", "accept4", "sendto", "recvfrom", "sendmsg", "recvmsg",
    "shutdown", "getsockopt", "setsockopt", "getsockname", "getpeername",
)
# The machine-code trap (trap.py) stays in place: once the filter is loaded no memory becomes
# executable. mmap and mprotect are allowed without PROT_EXEC and refused with it (EPERM): no page
# of torch can be rewritten and made executable again, and no copy of torch's original code can
# be mapped (dlopen of a library not loaded before the filter fails, so the zygote imports what
# submissions use first). prctl is allowed but for PR_SET_DUMPABLE: a non-dumpable child running
# as the slot uid cannot open /proc/self/mem, which writes through page protections. Applied by
# the allow-list (and "log"); the deny-list, which GPU runs use, leaves executable mappings to
# CUDA's lazily loaded libraries (a known limit, SECURITY.md).
PROT_EXEC = 0x4
EXEC_MAPPING_CALLS = ("mmap", "mprotect")
PRCTL_DENIED = {"PR_SET_DUMPABLE": 4}
EXEC_DENIED_ERRNO = errno.EPERM
# ioctl: only these requests (the low 32 bits, as the kernel reads them); terminal injection
# (TIOCSTI, TIOCLINUX) is not among them.
IOCTLS_ALLOWED = {"TCGETS": 0x5401, "TIOCGWINSZ": 0x5413, "FIONREAD": 0x541B, "FIONBIO": 0x5421,
                  "FIONCLEX": 0x5450, "FIOCLEX": 0x5451}
# What CUDA adds to SECCOMP_ALLOWED, once measured on a GPU host with the "log" mode. Empty: GPU
# runs use the deny-list.
SECCOMP_ALLOWED_GPU: tuple = ()

# The deny-list: calls numerical code never needs that are kernel attack surface or escape hatches.
SECCOMP_DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
    "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr", "open_by_handle_at",
    "name_to_handle_at", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "vhangup",
    "iopl", "ioperm", "modify_ldt", "lookup_dcookie", "fanotify_init", "kcmp", "personality",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "mknod", "mknodat",
    "pidfd_getfd", "memfd_secret", "landlock_create_ruleset",
    # No new programs: a fresh interpreter would have torch's attention switched back on
    # (see disarm.py), and numerical code never needs to start one.
    "execve", "execveat",
)
SECCOMP_DENIED_ERRNO = errno.EPERM
# Argument rules, in both filters:
SOCKET_FAMILY_ALLOWED = socket.AF_UNIX   # socket, socketpair: the only family; others EAFNOSUPPORT
CLONE_NAMESPACE_FLAGS_DENIED = ("mnt", "pid", "net", "ipc", "uts", "cgroup", "user")  # EPERM
CLONE3_ERRNO = errno.ENOSYS   # its flags live in memory, out of a filter's reach; glibc falls back
# The deny-list's ioctl rule (the allow-list has IOCTLS_ALLOWED): typing into a terminal
# (CVE-2017-5226), refused with EPERM.
IOCTLS_DENIED = {"TIOCSTI": 0x5412, "TIOCLINUX": 0x541C}


def describe(limits: Limits | None = None, threads: int = 1) -> dict:
    """The whole policy as one JSON-able dict (``attn-grader sandbox policy``)."""
    limits = limits or Limits()
    return {
        "limits": asdict(limits),
        "rlimits": {"cpu": rlimits(limits, "cpu"), "cuda": rlimits(limits, "cuda", memory_cgroup=True)},
        "cgroup": {"required": list(CGROUP_REQUIRED), "optional": list(CGROUP_OPTIONAL),
                   "cpu_period_us": CPU_PERIOD_US, **cgroup_limits(limits, threads)},
        "uids": dict(zip(("first", "count"), uid_slots())),
        "namespaces": {"wall": list(WALL_NAMESPACES), "child": list(CHILD_NAMESPACES),
                       "wall_capabilities": list(WALL_CAPS), "hostname": HOSTNAME},
        "filesystem": {
            "read_only": list(OS_TREES) + [f"{d} (or its symlink)" for d in OS_TOP_DIRS]
                         + [f"the interpreter, venv and packages of {', '.join(PYTHON_PACKAGES)}"],
            "wall_extra": list(WALL_ETC_BINDS),
            "root": f"tmpfs ({ROOT_TMPFS}), read-only after pivot_root",
            "sealed": f"the package directories of {', '.join(SEALED_PACKAGES)}: a read-only tmpfs over "
                      f"each, empty but for {', '.join(SEALED_KEEP)} bound back (their modules are imported "
                      f"before the child forks)",
            "/tmp": f"tmpfs, {limits.tmp_size} bytes, mode {TMP_MODE}, nosuid, nodev, fresh per run",
            "/dev": {"tmpfs": DEV_TMPFS + ", noexec", "nodes": list(DEV_NODES), "links": DEV_LINKS},
            "/etc": sorted(etc_files(0)) + ["ld.so.cache"],
            SUBMISSION_DIR: f"tmpfs ({SUBMISSION_TMPFS}), read-only, noexec; at most {SUBMISSION_FILES} "
                            f"files of {SUBMISSION_FILE_BYTES} bytes",
            PROC_MOUNT: "proc of the child's own pid namespace, nosuid, nodev, noexec",
            "masked_in_proc": [f"{PROC_MOUNT}/{name}" for name in MASKED_PROC_FILES],
            "gpu_only": [GPU_NODE_PREFIX + "* (dev-bound)", GPU_SYS + " (read-only)"],
        },
        "environment": {"zygote": zygote_env(), "child": child_env("cpu"),
                        "passed_through_for_gpu": list(PASSED_THROUGH)},
        "seccomp": {"mode": seccomp_mode("cpu"), "mode_for_gpu": seccomp_mode("cuda"),
                    "allowed": list(SECCOMP_ALLOWED), "ioctls_allowed": sorted(IOCTLS_ALLOWED),
                    "allowed_for_gpu_too": list(SECCOMP_ALLOWED_GPU),
                    "refused_errno": errno.errorcode[SECCOMP_REFUSED_ERRNO],
                    "denied_by_the_deny_list": list(SECCOMP_DENIED),
                    "denied_errno": errno.errorcode[SECCOMP_DENIED_ERRNO],
                    "socket_family_allowed": socket.AddressFamily(SOCKET_FAMILY_ALLOWED).name,
                    "executable_mappings": f"{', '.join(EXEC_MAPPING_CALLS)} with PROT_EXEC refused "
                                           f"({errno.errorcode[EXEC_DENIED_ERRNO]}) by the allow-list",
                    "prctl_denied": sorted(PRCTL_DENIED),
                    "clone_namespace_flags_denied": list(CLONE_NAMESPACE_FLAGS_DENIED),
                    "clone3": errno.errorcode[CLONE3_ERRNO], "ioctls_denied": sorted(IOCTLS_DENIED)},
    }
