"""The outer bubblewrap wall around the zygote, and what ``strict`` needs from the host.

The wall is the second layer: even if the zygote (or a child's escape from it) went
wrong, the host filesystem, network and processes stay out of sight. It holds the
OS libraries, the interpreter and its packages read-only, the sandbox's own code,
a size-capped /tmp, a minimal /dev and a fresh /proc, and nothing else: no home,
no repository, no host /etc.

We run it as root *without* a user namespace (a root bwrap with ``--unshare-user``
maps the sandbox user to host root, pitfall P1), keeping only the capabilities the
zygote needs to build per-child namespaces, mounts and uids.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import sys

from .. import settings
from . import policy

HERE = os.path.dirname(os.path.abspath(__file__))
ZYGOTE = os.path.join(HERE, "zygote.py")
zygote_env = policy.zygote_env


def bwrap_path() -> str | None:
    return settings.value("BWRAP") or shutil.which("bwrap")


def gpu_nodes() -> list[str]:
    return sorted(glob.glob(policy.GPU_NODE_PREFIX + "*"))


def python_roots() -> list[str]:
    """What the interpreter needs, read-only: its prefix, the venv, wherever torch and numpy live.

    Never the repository (a path holding it would let a submission import the grader).
    """
    import importlib.util
    import site
    roots = [sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))]
    for name in policy.PYTHON_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            here = os.path.dirname(spec.origin)
            roots.append(os.path.dirname(here) if spec.submodule_search_locations else here)
    roots += [p for p in site.getsitepackages() if os.path.isdir(p)]
    repo = os.path.dirname(os.path.dirname(HERE))
    kept: list[str] = []
    for root in sorted({os.path.abspath(r) for r in roots}, key=len):
        if root == repo or repo.startswith(root.rstrip("/") + "/"):
            continue  # "/" or a folder holding the repository
        if root.startswith("/usr/") or any(root.startswith(k + "/") for k in kept):
            continue  # inside something already bound
        kept.append(root)
    return kept


def zygote_command(control_fd: int, *, wall: bool, gpu: bool, tmp_size: int) -> list[str]:
    roots = python_roots()
    python = [sys.executable, "-I", "-B", ZYGOTE, str(control_fd), json.dumps(roots)]
    if not wall:
        return python
    args = [bwrap_path(), "--die-with-parent", "--new-session"]
    for ns in policy.WALL_NAMESPACES:
        args.append("--unshare-cgroup-try" if ns == "cgroup" else f"--unshare-{ns}")
    args += ["--cap-drop", "ALL"]
    for cap in policy.WALL_CAPS:
        args += ["--cap-add", cap]
    # Mount points first: a later --tmpfs /tmp would hide a repository or venv cloned under /tmp.
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_size), "--tmpfs", "/tmp",
             "--dir", policy.WALL_ROOT_DIR]
    for tree in policy.OS_TREES:
        args += ["--ro-bind", tree, tree]
    for top in policy.OS_TOP_DIRS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    seen = list(policy.OS_TREES)
    for prefix in roots + [HERE]:
        if not any(prefix == s or prefix.startswith(s + "/") for s in seen):
            args += ["--ro-bind", prefix, prefix]
            seen.append(prefix)
    for path in policy.WALL_ETC_BINDS:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    if gpu:
        for node in gpu_nodes():
            args += ["--dev-bind", node, node]
        args += ["--ro-bind", policy.GPU_SYS, policy.GPU_SYS]
    args += ["--clearenv"]
    for key, value in zygote_env().items():
        args += ["--setenv", key, value]
    return args + ["--chdir", "/", "--"] + python


def strict_problems(wall: bool = True) -> list[str]:
    """What this host lacks for full isolation (empty when ``strict`` can run)."""
    problems = []
    if not sys.platform.startswith("linux"):
        return [f"Linux namespaces, cgroups and seccomp (this is {sys.platform})"]
    if os.geteuid() != 0:
        problems.append("root privileges for the grader (per-run uids, mounts and cgroups; "
                        "run the grading worker as root or in a privileged container)")
    for ns in policy.CHILD_NAMESPACES:
        if not os.path.exists(f"/proc/self/ns/{ns}"):
            problems.append(f"the kernel's {ns} namespace")
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as exc:
        problems.append(f"seccomp via pyseccomp/libseccomp ({exc})")
    from .cgroups import CgroupUnavailable, detect
    if os.geteuid() == 0:
        try:
            detect()
        except CgroupUnavailable as exc:
            problems.append(str(exc))
    if wall and not bwrap_path():
        problems.append("bubblewrap for the outer wall (apt-get install bubblewrap)")
    return problems
