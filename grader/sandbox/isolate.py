"""Kernel primitives that wall in one submission's process (Linux only).

Loaded by path inside the zygote (never as part of the ``grader`` package), so it
imports only the standard library and ``pyseccomp``. What it applies (which binds,
namespaces, rlimits, seccomp rules) is declared in ``policy.py``; this module only
knows how. The order in which the zygote applies the layers matters; each step says
why it sits where it is.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import signal
import sys

libc = ctypes.CDLL(None, use_errno=True)  # the interpreter's own libc: no find_library (needs ld.so.cache)

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
CLONE_FLAGS = {"mnt": CLONE_NEWNS, "pid": CLONE_NEWPID, "net": CLONE_NEWNET, "ipc": CLONE_NEWIPC,
               "uts": CLONE_NEWUTS, "cgroup": CLONE_NEWCGROUP, "user": CLONE_NEWUSER}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP = 1, 4, 22
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
SECCOMP_MODE_FILTER = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine(), 155)


def _load_policy():
    """The sandbox policy, loaded by path once per process (shared with the zygote and harness)."""
    name = "_attn_policy"
    if name not in sys.modules:
        import importlib.util
        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location(name, os.path.join(here, "policy.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses looks its module up while the file executes
        spec.loader.exec_module(module)
    return sys.modules[name]


policy = _load_policy()


def namespace_flags(names) -> int:
    flags = 0
    for name in names:
        flags |= CLONE_FLAGS[name]
    return flags


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def unshare(flags: int) -> None:
    _check(libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(source, target, fstype=None, flags=0, data=None) -> None:
    enc = lambda s: None if s is None else os.fsencode(s)
    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


def prctl(option: int, arg: int = 0) -> None:
    _check(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)), f"prctl {option}")


def die_with_parent() -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def bind(source: str, target: str, *, readonly: bool = True, dev: bool = False) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    mount(source, target, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if dev else MS_NODEV) | (MS_RDONLY if readonly else 0)
    mount(None, target, None, flags)


def build_root(new_root: str, plan: dict, files: dict, tmp_size: int) -> None:
    """Fill the tmpfs at ``new_root`` with read-only binds, a minimal /dev, /proc, /tmp and /sub.

    ``plan`` is ``zygote.filesystem_plan()``: the host paths, resolved, of what ``policy``
    declares. Called as pid 1 of the new pid namespace (so /proc shows only the sandbox) and
    before the old root is detached (a /proc mount must not be more revealing than one
    already visible).
    """
    # /tmp first: binds of a venv or interpreter that live under /tmp then sit on top of it.
    os.makedirs(new_root + "/tmp")
    mount("tmpfs", new_root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={tmp_size},mode={policy.TMP_MODE}")
    for source in plan["ro_binds"]:
        if os.path.exists(source):
            bind(source, new_root + source)
    for link, target in plan.get("symlinks", {}).items():
        os.symlink(target, new_root + link)
    for hidden in plan.get("sealed", ()):  # torch's Python files: its modules are in memory already
        if os.path.isdir(new_root + hidden):
            mount("tmpfs", new_root + hidden, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, policy.SEALED_TMPFS)
            for keep in policy.SEALED_KEEP:  # its shared libraries, bound back (no Python in them)
                if os.path.isdir(os.path.join(hidden, keep)):
                    os.makedirs(os.path.join(new_root + hidden, keep))
                    bind(os.path.join(hidden, keep), os.path.join(new_root + hidden, keep))
            mount(None, new_root + hidden, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    etc = new_root + "/etc"
    os.makedirs(etc, exist_ok=True)
    for name, text in plan["etc"].items():
        with open(os.path.join(etc, name), "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())
    dev = new_root + "/dev"
    os.makedirs(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, policy.DEV_TMPFS)
    for node in policy.DEV_NODES + tuple(plan.get("gpu_nodes", ())):
        if os.path.exists("/dev/" + node):
            bind("/dev/" + node, f"{dev}/{node}", readonly=False, dev=True)
    for name, target in policy.DEV_LINKS.items():
        os.symlink(target, f"{dev}/{name}")
    proc = new_root + policy.PROC_MOUNT
    os.makedirs(proc)
    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mask_proc(new_root, proc, plan.get("proc_masks", {}))
    if plan.get("sys"):
        bind(policy.GPU_SYS, new_root + policy.GPU_SYS)
    sub = new_root + policy.SUBMISSION_DIR
    os.makedirs(sub)
    mount("tmpfs", sub, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, policy.SUBMISSION_TMPFS)
    for name, data in files.items():
        with open(os.path.join(sub, name), "wb") as f:
            f.write(data)
        os.chmod(os.path.join(sub, name), 0o644)
    mount(None, sub, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def mask_proc(new_root: str, proc: str, masks: dict) -> None:
    """Bind a synthetic file over each host-wide /proc file (``policy.masked_proc_files``).

    The sources live on a tmpfs of their own, detached once bound: the binds keep its files, and
    nothing of it shows in the root (unlinked sources on the root would block its read-only remount).
    """
    staging = new_root + "/.proc-masks"
    os.makedirs(staging)
    mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=700")
    for name, text in masks.items():
        target = os.path.join(proc, name)
        if not os.path.exists(target):
            continue  # not on this kernel
        source = os.path.join(staging, name.replace("/", "-"))
        with open(source, "w") as f:
            f.write(text)
        mount(source, target, None, MS_BIND)
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _check(libc.umount2(os.fsencode(staging), ctypes.c_int(MNT_DETACH)), "umount the /proc masks' source")
    os.rmdir(staging)


def pivot_into(new_root: str) -> None:
    """Make ``new_root`` the root, drop every trace of the old one, and freeze it read-only."""
    old = new_root + "/.old-root"
    os.makedirs(old)
    _check(libc.syscall(ctypes.c_long(SYS_PIVOT_ROOT), os.fsencode(new_root), os.fsencode(old)), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old-root", ctypes.c_int(MNT_DETACH)), "umount old root")
    os.rmdir("/.old-root")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def set_rlimits(limits: dict) -> None:
    """``policy.rlimits(...)``, soft = hard: a CPU overrun is a SIGKILL, not a catchable SIGXCPU."""
    for key, value in limits.items():
        if value is not None:
            resource.setrlimit(getattr(resource, policy.RLIMIT_NAMES[key]), (value, value))


def drop_privileges(uid: int) -> None:
    """Become the slot's unprivileged uid (no /etc/passwd entry needed), keeping no capability."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError(errno.EPERM, "could not drop privileges")
    # setuid clears the parent-death signal (P6): re-arm it so a killed waiter never leaves us running.
    die_with_parent()


# -- seccomp -------------------------------------------------------------------------------
IOCTL_REQUEST_BITS = 0xFFFFFFFF  # ioctl's request is an unsigned int: the kernel ignores the rest


def seccomp_program(mode: str) -> bytes:
    """Compile ``policy``'s filter for ``mode`` (see ``policy.seccomp_mode``) once, in the zygote;
    children only load the bytes (saves ~3 ms each).

    libseccomp takes a syscall's rules as alternatives and an unconditional rule wins over
    conditional ones, so every call with argument rules gets disjoint allowed and refused cases.
    """
    import tempfile

    import pyseccomp as sc
    family, ns_flags = policy.SOCKET_FAMILY_ALLOWED, namespace_flags(policy.CLONE_NAMESPACE_FLAGS_DENIED)
    if mode == "deny-list":
        f = sc.SyscallFilter(sc.ALLOW)
        for name in policy.SECCOMP_DENIED:
            _add(f, sc.ERRNO(policy.SECCOMP_DENIED_ERRNO), name)
        f.add_rule(sc.ERRNO(policy.CLONE3_ERRNO), "clone3")
        for request in policy.IOCTLS_DENIED.values():
            f.add_rule(sc.ERRNO(errno.EPERM), "ioctl", sc.Arg(1, sc.MASKED_EQ, IOCTL_REQUEST_BITS, request))
        f.add_rule(sc.ERRNO(policy.EXEC_DENIED_ERRNO), "prctl",
                   sc.Arg(0, sc.EQ, policy.PRCTL_DENIED["PR_SET_DUMPABLE"]))
    elif mode in ("allow-list", "log"):
        f = sc.SyscallFilter(sc.ERRNO(policy.SECCOMP_REFUSED_ERRNO) if mode == "allow-list" else sc.LOG)
        for name in dict.fromkeys(policy.SECCOMP_ALLOWED + tuple(policy.SECCOMP_ALLOWED_GPU)):
            _add(f, sc.ALLOW, name)
        for syscall in ("socket", "socketpair"):
            f.add_rule(sc.ALLOW, syscall, sc.Arg(0, sc.EQ, family))
        f.add_rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, ns_flags, 0))
        for request in policy.IOCTLS_ALLOWED.values():
            f.add_rule(sc.ALLOW, "ioctl", sc.Arg(1, sc.MASKED_EQ, IOCTL_REQUEST_BITS, request))
        refused = sc.ERRNO(policy.EXEC_DENIED_ERRNO)
        for syscall in policy.EXEC_MAPPING_CALLS:
            f.add_rule(sc.ALLOW, syscall, sc.Arg(2, sc.MASKED_EQ, policy.PROT_EXEC, 0))
            f.add_rule(refused, syscall, sc.Arg(2, sc.MASKED_EQ, policy.PROT_EXEC, policy.PROT_EXEC))
        dumpable = policy.PRCTL_DENIED["PR_SET_DUMPABLE"]
        f.add_rule(sc.ALLOW, "prctl", sc.Arg(0, sc.NE, dumpable))
        f.add_rule(refused, "prctl", sc.Arg(0, sc.EQ, dumpable))
        if policy.CLONE3_ERRNO != policy.SECCOMP_REFUSED_ERRNO or mode == "log":
            f.add_rule(sc.ERRNO(policy.CLONE3_ERRNO), "clone3")
    else:
        raise ValueError(f"unknown seccomp mode {mode!r}")
    for syscall in ("socket", "socketpair"):
        f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), syscall, sc.Arg(0, sc.NE, family))
    for name in policy.CLONE_NAMESPACE_FLAGS_DENIED:
        flag = CLONE_FLAGS[name]
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    with tempfile.TemporaryFile() as tmp:
        f.export_bpf(tmp)
        tmp.seek(0)
        return tmp.read()


def _add(f, action, name: str) -> None:
    try:
        f.add_rule(action, name)
    except (OSError, ValueError):
        pass  # a syscall this kernel/arch does not know


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_seccomp(program: bytes) -> None:
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                      ctypes.byref(prog), ctypes.c_ulong(0), ctypes.c_ulong(0)), "seccomp")


def close_fds_except(keep) -> None:
    keep = sorted(set(keep))
    low = 0
    for fd in keep + [max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 65536)]:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
