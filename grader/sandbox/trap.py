"""Make torch's built-in attention impossible to run in the sandboxed child, not merely switched off.

Loaded by path (stdlib, ctypes and numpy only), like ``disarm.py``. Whatever lives in the
student's process (a dispatcher registration, a flag, a patched function) the student can find
and undo. Machine code they cannot, once the kernel stops them from writing or mapping it:

* **The trap.** Every function in torch's shared libraries whose symbol names attention (the
  fused, flash, efficient and math SDPA kernels, native multi-head attention, the encoder-layer
  fast path, nested, quantized and autocast variants, their autograd and backward kernels, the
  Python bindings) is overwritten in memory: its first bytes jump to c10's ``TORCH_CHECK``
  failure, so a call raises ``RuntimeError`` with the message below in whatever thread, under
  whatever dispatch key it came, and the rest of its body is ``int3``, so a jump into the middle
  of one ends the process. The symbols come from the library's own ELF symbol table: static
  helpers and template instances are covered too, not only exported entry points.
* **The pages are anonymous copies.** The patched pages replace the library's file-backed ones:
  discarding them (``madvise``) yields zeros, never torch's code.
* **The kernel keeps it so** (``policy.py``'s seccomp rules and the zygote's identities): no
  ``mmap``/``mprotect`` with ``PROT_EXEC`` after start-up (so no page becomes executable again,
  and no second copy of the library can be mapped), no ``PR_SET_DUMPABLE`` and a non-root uid (so
  ``/proc/self/mem``, which writes through page protections, cannot be opened), no ``ptrace`` or
  ``process_vm_writev``.

A *group* is one set of functions with its message: ``attention`` is applied to every child
before it forks (the zygote, the local fork server, the plain harness); ``autograd`` (reverse-mode
engine, the per-op backward formulas, forward-mode AD) only to tasks whose point is a backward by
hand. A group needed after the child's seccomp filter is loaded (a pre-warmed child learns its
task later) is *staged*: its patched pages are built executable beforehand at a spare address,
and :meth:`Staged.apply` moves them over the originals with ``mremap``, which needs no new
executable mapping.

x86-64 Linux only (the service's hosts); elsewhere :func:`problem` says why and nothing is
patched (the local pre-check then relies on ``disarm.py`` and the parent's fingerprint).
"""
from __future__ import annotations

import bisect
import ctypes
import mmap
import os
import platform
import struct

import numpy as np

PAGE = mmap.PAGESIZE
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = 0x02, 0x10, 0x20
MREMAP_MAYMOVE, MREMAP_FIXED = 1, 2
CHECK_FAIL = b"_ZN3c106detail14torchCheckFailEPKcS2_jS2_"  # c10::detail::torchCheckFail(char const*, ..., char const*)

ATTENTION_MESSAGE = ("torch's built-in attention is switched off while grading: write the attention yourself "
                     "(matmul, softmax, matmul)")
AUTOGRAD_MESSAGE = ("autograd is switched off in this task (reverse and forward mode): compute the gradients "
                    "with your own formulas")

# Substrings of mangled names (case as they appear in identifiers).
ATTENTION_WORDS = (b"ttention", b"sdpa", b"sdp_", b"ultiHead", b"ulti_head", b"ultihead", b"asked_softmax",
                   b"ransformerEncoderLayer", b"ransformer_encoder_layer")


DESTRUCTORS = (b"D0Ev", b"D1Ev", b"D2Ev")  # compute nothing; a registered kernel's runs at exit


def _attention(name: bytes) -> bool:
    # ONNX schema tables: no computation, registered lazily
    return b"onnx_torch" not in name and not any(d in name for d in DESTRUCTORS)


def _autograd(name: bytes) -> bool:
    """The engine, forward mode, and of the generated backward nodes only what computes a
    gradient (apply): their constructors and destructors run with every forward pass. Of the
    functions named ``backward``, torch's own (ATen's ``*_backward*`` kernels under every dispatch
    key, their wrappers and lambdas): not the standard library's ``std::move_backward`` nor the
    C libraries' (oneDNN, MKL), which only torch's backward kernels call."""
    if any(d in name for d in DESTRUCTORS):
        return False
    if name.startswith(b"_ZN5torch8autograd9generated"):
        return any(w in name for w in (b"5applyE", b"apply_with_saved", b"apply_functional"))
    if b"backward" in name and not any(w in name for w in AUTOGRAD_WORDS if w != b"backward"):
        # at::_ops::*::call only hands the call to the dispatcher, whose kernels are all trapped:
        # left as it is, a call reaches the child's raising registration first and is recorded.
        return name.startswith(b"_Z") and not name.startswith((b"_ZNSt", b"_ZSt", b"_ZN2at4_ops")) \
            and not any(w in name for w in (b"move_backward", b"dnnl", b"ideep", b"mkl"))
    return True

AUTOGRAD_WORDS = (
    b"_ZN5torch8autograd6Engine7execute",                  # Engine::execute: every backward pass
    b"_ZN5torch8autograd6Engine23execute_with_graph_task",
    b"_ZN5torch8autograd6python12PythonEngine7execute",
    b"_ZN5torch8autograd9generated",                       # the per-op backward formulas (Backward0::apply)
    b"_ZN5torch8autograd14ForwardADLevel",                 # entering a dual level (forward mode)
    b"_ZN5torch8autograd12AutogradMeta11set_fw_grad",      # attaching a tangent
    b"_make_dual",
    b"backward",                                           # ATen's backward kernels (_softmax_backward_data...)
    b"_ZN5torch3jit13differentiate",                       # TorchScript's symbolic differentiation
)
# Only libraries whose callers are C++ (libtorch_python's bindings are called by CPython, which
# cannot unwind a C++ exception: trapping them would abort the process instead of raising).
GROUPS = {
    "attention": (("libtorch_cpu", "libtorch_cuda"), ATTENTION_WORDS, _attention, ATTENTION_MESSAGE),
    "autograd": (("libtorch_cpu",), AUTOGRAD_WORDS, _autograd, AUTOGRAD_MESSAGE),
}

_SYM = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"),
                 ("size", "<u8")])
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mremap.restype = ctypes.c_void_p
_libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
MAP_FAILED = ctypes.c_void_p(-1).value


def problem() -> str | None:
    """Why the trap cannot be applied in this process (None when it can)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"the trap is written for x86-64 Linux, not {platform.system()} {platform.machine()}"
    if not loaded_libraries():
        return "torch's libraries are not mapped in this process"
    return None


def loaded_libraries() -> dict:
    """{stem: (path, load base)} of torch's shared libraries mapped in this process."""
    found = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6 or int(parts[2], 16) != 0:
                continue
            path = parts[5].strip()
            stem = os.path.basename(path).split(".so")[0]
            if stem.startswith("libtorch") or stem == "libc10":
                found.setdefault(stem, (path, int(parts[0].split("-")[0], 16)))
    return found


def _sections(f) -> list:
    head = f.read(64)
    if head[:4] != b"\x7fELF" or head[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", head, 0x28)
    entsize, count = struct.unpack_from("<HH", head, 0x3A)
    f.seek(shoff)
    table = f.read(entsize * count)
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
    return [struct.unpack_from("<IIQQQQIIQQ", table, i * entsize) for i in range(count)]


def functions(path: str, words, accept=None) -> np.ndarray:
    """(offset, size) rows of the functions in ``path``'s symbol table whose mangled name contains
    one of ``words`` (and passes ``accept(name)``), leaving out any that shares bytes with a function
    outside the set (identical code folded by the linker, aliases): that code serves others too."""
    with open(path, "rb") as f:
        sections = _sections(f)
        tables = [s for s in sections if s[1] == 2] or [s for s in sections if s[1] == 11]  # SYMTAB, else DYNSYM
        if not tables:
            return np.zeros((0, 2), np.uint64)
        symtab = tables[0]
        strings = sections[symtab[6]]
        f.seek(strings[4])
        names = f.read(strings[5])
        f.seek(symtab[4])
        syms = np.frombuffer(f.read(symtab[5]), dtype=_SYM)
    starts = set()
    for word in words:
        at = names.find(word)
        while at != -1:
            begin = names.rfind(b"\0", 0, at) + 1
            end = names.find(b"\0", at)
            if accept is None or accept(names[begin:end]):
                starts.add(begin)
            at = names.find(word, end)
    funcs = syms[((syms["info"] & 0xF) == 2) & (syms["size"] > 0) & (syms["shndx"] != 0)]
    order = np.argsort(funcs["value"], kind="stable")
    value, size = funcs["value"][order], funcs["size"][order]
    hit = np.isin(funcs["name"][order], np.fromiter(starts, np.uint32, len(starts)))
    end = value + size
    # A chosen function is shared when another function's bytes overlap it: the nearest other
    # function starting at or before it reaches past its start, or the next one starts inside it.
    other_end = np.where(hit, 0, end)
    reach = np.maximum.accumulate(other_end)            # furthest end of others starting up to here
    before = np.concatenate(([0], reach[:-1]))
    other_start = np.where(hit, np.iinfo(np.uint64).max, value)
    after = np.minimum.accumulate(other_start[::-1])[::-1]  # nearest start of others from here on
    after = np.concatenate((after[1:], [np.iinfo(np.uint64).max]))
    same = np.concatenate(([False], (value[1:] == value[:-1]) & (size[1:] == size[:-1])))  # aliases of one function
    shared = (before > value) | (after < end)
    keep = hit & ~shared & ~same
    return np.stack([value[keep], size[keep]], axis=1)


def _stub(target: int, at: int, message: str) -> bytes:
    """x86-64: ``torchCheckFail("attn-grader", "attn-grader", 0, message)`` as a tail call, so the
    raised c10::Error unwinds from the caller of the trapped function like any TORCH_CHECK."""
    text = b"attn-grader\0"
    head = 7 + 7 + 5 + 7 + 10 + 2
    msg_at = head + len(text)

    def lea(modrm: int, offset: int, here: int) -> bytes:  # lea reg, [rip + offset - (here + 7)]
        return bytes((0x48, 0x8D, modrm)) + struct.pack("<i", offset - (here + 7))

    code = (lea(0x3D, head, 0) + lea(0x35, head, 7) + b"\xBA" + struct.pack("<I", 0) + lea(0x0D, msg_at, 19)
            + b"\x48\xB8" + struct.pack("<Q", target) + b"\xFF\xE0")
    return code + text + message.encode() + b"\0"


class Patch:
    """The patched bytes of one group in one process: {address: bytes} and the page runs they touch."""

    def __init__(self, group: str):
        libs, words, accept, message = GROUPS[group]
        loaded = loaded_libraries()
        check_fail = ctypes.cast(getattr(ctypes.CDLL(loaded["libc10"][0]), CHECK_FAIL.decode()),
                                 ctypes.c_void_p).value
        self.group, self.bytes = group, {}
        for stem in libs:
            if stem not in loaded:
                continue
            path, base = loaded[stem]
            rows = functions(path, words, accept)
            if not len(rows):
                continue
            stub = _stub(check_fail, 0, message)
            host = int(np.argmax(rows[:, 1]))  # the largest function holds the shared stub
            if int(rows[host, 1]) < len(stub):
                raise RuntimeError(f"no function in {stem} is large enough to hold the trap")
            thunk = base + int(rows[host, 0])
            for i, (value, size) in enumerate(rows.tolist()):
                at = base + value
                if i == host:
                    body = stub + b"\xCC" * (size - len(stub))
                elif size >= 5:  # jmp rel32 to the stub, then int3
                    body = b"\xE9" + struct.pack("<i", thunk - (at + 5)) + b"\xCC" * (size - 5)
                else:
                    body = b"\xCC" * size
                self.bytes[at] = body
        self.runs = _page_runs(self.bytes)

    def count(self) -> int:
        return len(self.bytes)

    def _pages(self):
        """Each run of pages as it is now, with this group's bytes written over it. Every function
        lies inside one run (runs are the contiguous pages its bytes touch), the one its start is in."""
        starts = [start for start, _ in self.runs]
        bodies = [[] for _ in self.runs]
        for at, body in self.bytes.items():
            bodies[bisect.bisect_right(starts, at) - 1].append((at, body))
        for (start, length), inside in zip(self.runs, bodies):
            page = bytearray(ctypes.string_at(start, length))
            for at, body in inside:
                page[at - start:at - start + len(body)] = body
            yield start, length, bytes(page)

    def install(self) -> int:
        """Replace the pages in place (before seccomp; single-threaded: nothing may run in them meanwhile).
        Returns the bytes of pages replaced."""
        for start, length, data in self._pages():
            _check(_libc.mmap(start, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                   == start, "mmap")
            ctypes.memmove(start, data, length)
            _check(_libc.mprotect(start, length, PROT_READ | PROT_EXEC) == 0, "mprotect")
        return sum(length for _, length in self.runs)

    def stage(self) -> "Staged":
        """Build the patched pages, executable, at a spare address, to be moved in later by mremap."""
        moves = []
        for start, length, data in self._pages():
            spare = _libc.mmap(None, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            _check(spare not in (None, MAP_FAILED), "mmap")
            ctypes.memmove(spare, data, length)
            _check(_libc.mprotect(spare, length, PROT_READ | PROT_EXEC) == 0, "mprotect")
            moves.append((spare, start, length))
        return Staged(self.group, moves)



class Staged:
    """A group's patched pages, built in advance; :meth:`apply` needs no new executable mapping."""

    def __init__(self, group: str, moves: list):
        self.group, self.moves, self.applied = group, moves, False

    def apply(self) -> None:
        if self.applied:
            return
        for spare, start, length in self.moves:
            moved = _libc.mremap(spare, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, start)
            _check(moved == start, "mremap")
        self.applied = True


def _page_runs(patches: dict) -> list:
    """Contiguous runs of whole pages covering every patched byte: [(start, length)]."""
    pages = set()
    for at, body in patches.items():
        pages.update(range(at // PAGE, (at + len(body) - 1) // PAGE + 1))
    runs = []
    for page in sorted(pages):
        if runs and runs[-1][1] == page:
            runs[-1][1] = page + 1
        else:
            runs.append([page, page + 1])
    return [(lo * PAGE, (hi - lo) * PAGE) for lo, hi in runs]


def _check(ok: bool, what: str) -> None:
    if not ok:
        err = ctypes.get_errno()
        raise OSError(err, f"trap: {what}: {os.strerror(err)}")


_INSTALLED: dict = {}
_STAGED: dict = {}


def install(group: str) -> int:
    """Apply ``group`` in this process now (idempotent). Returns how many functions were trapped."""
    if group not in _INSTALLED:
        patch = Patch(group)
        patch.install()
        _INSTALLED[group] = patch.count()
    return _INSTALLED[group]


def stage(group: str) -> None:
    """Prepare ``group`` so that :func:`apply_staged` can put it in place after seccomp."""
    if group not in _STAGED and group not in _INSTALLED:
        _STAGED[group] = Patch(group).stage()


def apply_staged(group: str) -> bool:
    """Move a staged group's pages in (idempotent); False when it was never staged."""
    if group in _INSTALLED:
        return True
    staged = _STAGED.get(group)
    if staged is None:
        return False
    staged.apply()
    _INSTALLED[group] = len(staged.moves)
    return True
