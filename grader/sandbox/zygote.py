"""The fork server: imports torch once, then forks one walled-in child per submission.

Run as a script (``python -I zygote.py``) with its control socket on fd 3, normally
inside the outer bubblewrap wall (see ``wall.py``). It is trusted but holds no
secrets: every child can read all of its memory, so it never sees a reference
answer, a seed or a credential. It must be single-threaded whenever it forks (a
thread pool caught mid-lock deadlocks every child), so it warms torch up with one
thread and checks that no thread survived.

Per request (a JSON header plus file descriptors over SCM_RIGHTS) it forks a waiter,
which joins the run's cgroup, unshares the namespaces and forks the child: pid 1 of
the new pid namespace, which builds a fresh read-only root, sets rlimits, drops to
the slot's uid, installs seccomp and serves the harness protocol. The waiter reports
the child's exit status on a pipe the grader reads.
"""
import fcntl
import gc
import importlib.util
import json
import os
import select
import socket
import sys
import traceback

CONTROL_FD = int(sys.argv[1]) if len(sys.argv) > 1 else 3
ROOTS = json.loads(sys.argv[2]) if len(sys.argv) > 2 else [sys.base_prefix, sys.prefix]
HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name: str, filename: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


isolate = _load("_attn_isolate", "isolate.py")
policy = isolate.policy  # what every child gets: declared there, applied here and in isolate
harness = _load("_attn_harness", "harness.py")  # imports torch and the wire format


def filesystem_plan() -> dict:
    """``policy``'s filesystem view, resolved on this host: what a child's root holds read-only."""
    binds, links = list(policy.OS_TREES), {}
    for top in policy.OS_TOP_DIRS:
        if os.path.islink(top):
            links[top] = os.readlink(top)
        elif os.path.isdir(top):
            binds.append(top)
    for prefix in ROOTS:  # the interpreter, venv and packages (computed by the grader: wall.python_roots)
        if not any(prefix == b or prefix.startswith(b + "/") for b in binds):
            binds.append(prefix)
    dev_dir, prefix = os.path.split(policy.GPU_NODE_PREFIX)
    gpu = sorted(n for n in os.listdir(dev_dir) if n.startswith(prefix)) if os.path.isdir(dev_dir) else []
    sealed = [d for d in harness.disarm._seal().package_dirs() if os.path.basename(d) in policy.SEALED_PACKAGES]
    return {"ro_binds": binds, "symlinks": links, "gpu_nodes": gpu, "sys": bool(gpu), "sealed": sealed}


def ld_cache() -> bytes:
    # Copied, not bound: ldconfig replaces the file, and a bind of the old, deleted inode fails.
    try:
        with open("/etc/ld.so.cache", "rb") as f:
            return f.read()
    except OSError:
        return b""


LD_CACHE = b""


PLAN = None
SECCOMP: dict = {}  # the compiled filters, by mode (policy.SECCOMP_MODES)


def pick_root(plan: dict) -> str:
    """A directory to mount the new root on that hides none of the bind sources."""
    for cand in policy.ROOT_CANDIDATES:
        if os.path.isdir(cand) and not any(s == cand or s.startswith(cand + "/") for s in plan["ro_binds"]):
            return cand
    raise RuntimeError("no directory to build the sandbox root on")


def read_file(fd: int, cap: int) -> bytes:
    chunks, total = [], 0
    while total <= cap:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > cap:
        raise ValueError("submission file too large")
    return b"".join(chunks)


def run_child(req: dict, fds: dict, files: dict) -> None:
    """Pid 1 of the new namespaces: wall in, then become the harness. Never returns."""
    import torch
    isolate.die_with_parent()
    os.setsid()
    socket.sethostname(policy.HOSTNAME)
    isolate.mount(None, "/", None, isolate.MS_REC | isolate.MS_PRIVATE)
    plan = dict(PLAN, etc=policy.etc_files(req["uid"]))
    plan["etc"]["ld.so.cache"] = LD_CACHE
    plan["proc_masks"] = policy.masked_proc_files(req["memory_bytes"], os.sched_getaffinity(0))
    if req.get("device", "cpu") == "cpu":
        plan["gpu_nodes"], plan["sys"] = [], False
    new_root = pick_root(plan)
    isolate.mount("tmpfs", new_root, "tmpfs", isolate.MS_NOSUID | isolate.MS_NODEV, policy.ROOT_TMPFS)
    isolate.build_root(new_root, plan, files, req["tmp_size"])
    isolate.pivot_into(new_root)
    # Move the pipes to 1..4 via high copies, so no target clobbers another's source.
    high = {k: fcntl.fcntl(v, fcntl.F_DUPFD, 100) for k, v in fds.items()}
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    for k, target in (("stdout", 1), ("stderr", 2), ("request", 3), ("response", 4)):
        os.dup2(high[k], target)
    status = fds["status"] = os.dup2(high["status"], 5)  # the error path below writes here too
    isolate.close_fds_except({0, 1, 2, 3, 4, 5})
    isolate.set_rlimits(req["rlimits"])
    isolate.drop_privileges(req["uid"])
    isolate.load_seccomp(SECCOMP[req["seccomp"]])
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir("/tmp")
    torch.set_num_threads(int(req.get("threads", 1)))
    if req.get("warm"):
        harness.prepare_device(req.get("device", "cpu"))
    os.write(status, b'{"ready": true}\n')
    os.close(status)  # from here on, only the waiter speaks on the status pipe
    fds["status"] = -1
    sys.argv = ["submission"]
    harness.serve()
    os._exit(0)


def run_waiter(req: dict, fds: dict, cgroup_fds: list, files: dict) -> None:
    """Joins the cgroup, unshares, forks pid 1 and reports how it ended. Never returns."""
    status = fds["status"]
    try:
        os.setsid()
        isolate.die_with_parent()
        for fd in cgroup_fds:
            os.write(fd, b"0")  # "0" = this process; the child inherits the cgroup
            os.close(fd)
        isolate.unshare(isolate.namespace_flags(policy.CHILD_NAMESPACES))
        pid = os.fork()
        if pid == 0:
            try:
                run_child(req, fds, files)
            except BaseException as exc:
                try:
                    if fds["status"] >= 0:
                        msg = {"setup_error": f"{type(exc).__name__}: {exc}"}
                        os.write(fds["status"], (json.dumps(msg) + "\n").encode())
                finally:
                    os._exit(120)
            os._exit(120)
        for fd in list(fds.values()):
            if fd != status:
                os.close(fd)
        _, wstatus, usage = os.wait4(pid, 0)
        code = -os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else os.WEXITSTATUS(wstatus)
        os.write(status, (json.dumps({"exit": code, "cpu": usage.ru_utime + usage.ru_stime}) + "\n").encode())
    except BaseException as exc:
        try:
            os.write(status, (json.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}) + "\n").encode())
        except OSError:
            pass
    os._exit(0)


FD_NAMES = ("request", "response", "stdout", "stderr", "status")


def spawn(sock: socket.socket, req: dict, fds: list) -> None:
    named = dict(zip(FD_NAMES, fds[:5]))
    n_cg = int(req["n_cgroup"])
    cgroup_fds = fds[5:5 + n_cg]
    file_fds = fds[5 + n_cg:]
    try:
        files = {os.path.basename(name): read_file(fd, policy.SUBMISSION_FILE_BYTES)
                 for name, fd in zip(req["files"], file_fds)}
    except (OSError, ValueError) as exc:
        sock.send(json.dumps({"error": f"cannot read the submission: {exc}"}).encode())
        files = None
    if files is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            run_waiter(req, named, cgroup_fds, files)
        sock.send(json.dumps({"pid": pid}).encode())
    for fd in fds:
        os.close(fd)


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def preload_extensions() -> int:
    """Map every extension module of the standard library and numpy now: once a child's seccomp
    filter is loaded, nothing can be mapped executable (policy.EXEC_MAPPING_CALLS), so a module a
    submission imports later (math, decimal, numpy.fft...) must already be in memory, where
    dlopen finds it without mapping anything. Only the libraries are loaded, not the modules:
    no module's initialisation runs here."""
    import ctypes

    import numpy
    count = 0
    roots = [p for p in sys.path if p.endswith("lib-dynload")] + [os.path.dirname(numpy.__file__)]
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                if name.endswith(".so"):
                    try:
                        ctypes.CDLL(os.path.join(folder, name), mode=os.RTLD_NOW | os.RTLD_LOCAL)
                        count += 1
                    except OSError:
                        pass  # needs a library the sandbox does not have (tkinter's Tk): not importable there
    return count


def preload_torch() -> None:
    """Import now what honest code makes torch import lazily: the children cannot, since torch's
    files are sealed from them (policy.SEALED_PACKAGES). torch.compile's first call (TorchDynamo
    with the eager backend the harness gives it), forward-mode AD's decompositions, and the public
    modules a submission may import for itself."""
    import importlib

    import torch
    x = torch.randn(3, 4)
    torch.compile(lambda t: torch.softmax(t @ t.T, dim=-1), backend="eager")(x)
    torch.func.jvp(lambda t: torch.softmax(t, dim=-1), (x,), (torch.ones_like(x),))
    torch.func.vmap(torch.sum)(x)
    for name in policy.PRELOADED_TORCH_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # a torch built without it (torch.distributed): the children lack it too
            pass
    torch._dynamo.reset()  # nothing compiled here stays cached for the children


def threads_alive() -> int:
    return len(os.listdir("/proc/self/task"))


def main() -> None:
    global PLAN, LD_CACHE
    import torch
    sock = socket.socket(fileno=CONTROL_FD)
    try:
        torch.set_num_threads(1)
        harness.warm_up()   # the lazy imports (sympy under backward) happen here, once (P2)
        import numpy  # noqa: F401  (students import it; make that free)
        # torch.utils.checkpoint imports TorchDynamo on its first call: 100 MiB of objects a child
        # would otherwise build itself, inside a measured call (tiled_attention's memory checks).
        import torch._dynamo  # noqa: F401
        preload_torch()  # before disarm: one pass over the loaded code strips it all (seal.py)
        harness.disarm.disarm(stage_autograd=True)  # torch's own attention off (its kernels trapped) in every child, paid once here
        preload_extensions()
        PLAN, LD_CACHE = filesystem_plan(), ld_cache()
        SECCOMP.update((mode, isolate.seccomp_program(mode)) for mode in policy.SECCOMP_MODES)
        isolate.prctl(isolate.PR_SET_CHILD_SUBREAPER, 1)
        isolate.prctl(isolate.PR_SET_DUMPABLE, 0)
        # What the children inherit is left out of the collector's passes: a full collection in a
        # child would otherwise touch, and so copy, every page of it (noise in measured memory).
        gc.freeze()
        if threads_alive() != 1:
            raise RuntimeError(f"the zygote has {threads_alive()} threads; forking now would deadlock "
                               "children (set OMP/MKL/OPENBLAS_NUM_THREADS=1)")
    except BaseException as exc:
        sock.send(json.dumps({"error": f"zygote start-up failed: {type(exc).__name__}: {exc}"}).encode())
        raise
    sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    while True:
        readable, _, _ = select.select([sock], [], [], 0.5)
        reap()
        if not readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 32)
        except OSError:
            return
        if not data:
            return  # the grader went away
        try:
            spawn(sock, json.loads(data), fds)
        except Exception:
            sock.send(json.dumps({"error": traceback.format_exc(limit=3)}).encode())


if __name__ == "__main__":
    main()
