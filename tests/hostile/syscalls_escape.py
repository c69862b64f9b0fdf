# attack: escape hatches and kernel attack surface through raw syscalls
# expect: exception
import ctypes
import os
import platform

libc = ctypes.CDLL(None, use_errno=True)
CALLS = {  # x86_64 numbers
    "ptrace_attach_1": (101, 16, 1, 0, 0), "unshare_user": (272, 0x10000000), "unshare_mnt": (272, 0x20000),
    "mount": (165, 0, 0, 0, 0, 0), "setuid0": (105, 0), "bpf": (321, 0, 0, 0), "perf_event_open": (298, 0, 0, -1, -1, 0),
    "io_uring_setup": (425, 1, 0), "userfaultfd": (323, 0), "keyctl": (250, 0), "chroot": (161, 0),
    "init_module": (175, 0, 0, 0), "setns": (308, 0, 0), "pidfd_getfd": (438, 0, 0, 0),
}


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    if platform.machine() != "x86_64":
        raise PermissionError("these syscall numbers are x86_64's")
    report = []
    for name, (nr, *args) in CALLS.items():
        res = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        report.append(f"{name}={'SUCCEEDED' if res >= 0 else os.strerror(ctypes.get_errno())}")
    try:
        os.setuid(0)
        report.append("setuid SUCCEEDED" if os.getuid() == 0 else "setuid no effect")
    except OSError as exc:
        report.append(f"setuid: {exc}")
    raise PermissionError(", ".join(report))
