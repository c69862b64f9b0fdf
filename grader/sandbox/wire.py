"""Framed messages of JSON plus raw tensors, the only format that crosses the sandbox wall.

A frame is ``MAGIC | u32 header length | JSON header | raw little-endian buffers``.
Nothing is ever unpickled: the reader checks the dtype against an allow-list and the
shapes and sizes against caps *before* it allocates anything. Tensors inside a
message are written as ``{"$t": index}`` and travel as raw buffers after the header.

This module imports only the standard library and torch, because the sandboxed
harness loads it by path without the rest of the project.
"""
from __future__ import annotations

import json
import math
import os
import select
import struct
import time

import torch

MAGIC = b"ATN1"
MAX_HEADER = 64 * 1024
MAX_TENSORS = 64
MAX_NDIM = 8
MAX_BYTES = 256 * 1024 * 1024

DTYPES = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class WireError(Exception):
    """A malformed, oversized or truncated frame."""


class WireTimeout(WireError):
    """The other side did not finish a frame before the deadline."""


def pack(obj, tensors: list) -> object:
    """Replace tensors in a JSON-like structure by references into ``tensors``."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return {"$t": len(tensors) - 1}
    if isinstance(obj, dict):
        return {str(k): pack(v, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [pack(v, tensors) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"$f": repr(obj)}
    return obj


MAX_DEPTH = 16  # no honest message nests deeper than a few levels


def unpack(obj, tensors: list, depth: int = 0):
    """Inverse of :func:`pack`; a reference to a tensor that was not sent is a :class:`WireError`."""
    if depth > MAX_DEPTH:
        raise WireError(f"message nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, dict):
        if set(obj) == {"$t"}:
            index = obj["$t"]
            if type(index) is not int or not 0 <= index < len(tensors):
                raise WireError(f"reference to tensor {index!r:.20} that the frame does not carry")
            return tensors[index]
        if set(obj) == {"$f"}:
            if obj["$f"] not in ("nan", "inf", "-inf"):
                raise WireError(f"bad float marker {obj['$f']!r:.20}")
            return float(obj["$f"])
        return {k: unpack(v, tensors, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [unpack(v, tensors, depth + 1) for v in obj]
    return obj


def encode(message: dict) -> bytes:
    tensors: list = []
    body = pack(message, tensors)
    metas, buffers = [], []
    for t in tensors:
        t = t.detach().to("cpu").contiguous()
        if t.dtype not in DTYPE_NAMES:
            raise WireError(f"dtype {t.dtype} cannot travel")
        metas.append({"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape)})
        raw = t.view(torch.uint8) if t.numel() and t.dtype != torch.uint8 else t
        buffers.append(raw.numpy().tobytes() if t.numel() else b"")
    header = json.dumps({"body": body, "tensors": metas}, allow_nan=False).encode()
    if len(header) > MAX_HEADER:
        raise WireError("header too large")
    return MAGIC + struct.pack("<I", len(header)) + header + b"".join(buffers)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WireTimeout("timed out waiting for the other side")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise WireError("the other side closed the channel mid-frame" if got or chunks else "closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_message(fd: int, *, deadline: float | None = None, max_bytes: int = MAX_BYTES) -> dict:
    """Read one frame from a file descriptor, validating everything before allocating."""
    if _read_exact(fd, 4, deadline) != MAGIC:
        raise WireError("bad magic: not a result frame")
    (hlen,) = struct.unpack("<I", _read_exact(fd, 4, deadline))
    if hlen > MAX_HEADER:
        raise WireError(f"header of {hlen} bytes exceeds {MAX_HEADER}")
    raw_header = _read_exact(fd, hlen, deadline)
    try:
        header = json.loads(raw_header)
        metas, body = header["tensors"], header["body"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: deep nesting
        raise WireError(f"malformed header: {type(exc).__name__}") from None
    if not isinstance(metas, list) or len(metas) > MAX_TENSORS:
        raise WireError("too many tensors")
    sizes, total = [], 0
    for m in metas:
        try:
            dtype, shape = DTYPES[m["dtype"]], m["shape"]
        except (KeyError, TypeError, IndexError):
            raise WireError(f"dtype not allowed: {m!r:.80}") from None
        if (not isinstance(shape, list) or len(shape) > MAX_NDIM
                or not all(isinstance(d, int) and 0 <= d < 2**40 for d in shape)):
            raise WireError(f"bad shape: {shape!r:.80}")
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        total += nbytes
        if total > max_bytes:
            raise WireError(f"frame larger than {max_bytes} bytes")
        sizes.append((dtype, shape, nbytes))
    tensors = []
    for dtype, shape, nbytes in sizes:
        raw = bytearray(_read_exact(fd, nbytes, deadline)) if nbytes else bytearray()
        flat = torch.frombuffer(raw, dtype=dtype) if nbytes else torch.empty(0, dtype=dtype)
        tensors.append(flat.reshape(shape))  # the bytearray is this tensor's own: no copy needed
    message = unpack(body, tensors)
    if not isinstance(message, dict):
        raise WireError(f"a message is a JSON object, not {type(message).__name__}")
    return message


def write_message(fd: int, message: dict, *, deadline: float | None = None) -> None:
    """Write one frame. With a deadline the fd is written without blocking: a child that stops
    reading (a full pipe) makes this raise WireTimeout instead of hanging the grader."""
    data = memoryview(encode(message))
    if deadline is None:
        while data:
            n = os.write(fd, data)
            data = data[n:]
        return
    was_blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise WireTimeout("timed out writing to the other side")
            try:
                n = os.write(fd, data)
            except BlockingIOError:
                continue
            data = data[n:]
    finally:
        os.set_blocking(fd, was_blocking)
