"""Keys and values that exist only block by block: the input of ``tiled_attention``'s streaming check.

Loaded by path by the harness (stdlib and torch only), and imported by the parent, which draws the
same numbers for its reference. A *streamed* tensor (1, S, width) is drawn from a seed in chunks of
``CHUNK`` rows, each chunk from its own generator, so any range of rows can be made on its own, in
any order, and is the same however it is cut.

In the child it is a tensor subclass without storage: its size, dtype and device are there, and a
slice along the sequence (``key[..., j:j + B, :]``, ``key.narrow``) makes that block, while
``split``/``chunk`` along the sequence, ``detach``, ``clone``, ``to(dtype)`` and a
``view``/``reshape`` to the same shape (flattening the leading dimensions, all 1 here) give more
streamed tensors. Anything else (a product with the whole key, ``torch.cat`` of every block) makes
every row it touches. Nothing here is a boundary: the parent measures the run's memory from its cgroup, and
the keys and values in full are far larger than what it allows (see
``grader/tasks/tiled_attention/memory.py``); this class only makes honest block-by-block code cost what it
holds.
"""
import torch

CHUNK = 256  # rows drawn by one generator
_aten = torch.ops.aten


def rows(spec: dict, start: int, stop: int, dtype=torch.float32) -> torch.Tensor:
    """Rows [start, stop) of the streamed tensor ``spec`` ({"seed", "length", "width"}), (1, n, width)."""
    start, stop = max(0, start), min(int(spec["length"]), stop)
    if stop <= start:
        return torch.empty(1, 0, int(spec["width"]), dtype=dtype)
    first, last = start // CHUNK, (stop - 1) // CHUNK
    parts = [_chunk(spec, chunk) for chunk in range(first, last + 1)]
    block = torch.cat(parts) if len(parts) > 1 else parts[0]
    block = block[start - first * CHUNK:stop - first * CHUNK]
    return block.unsqueeze(0).to(dtype, copy=True)  # never the cached chunk itself


_LAST: dict = {}  # the chunk drawn last, per seed: tiles smaller than a chunk draw it once


def _chunk(spec: dict, chunk: int) -> torch.Tensor:
    seed = int(spec["seed"])
    if _LAST.get(seed, (None,))[0] != chunk:
        g = torch.Generator().manual_seed(seed * 1_000_003 + chunk)
        _LAST[seed] = (chunk, torch.randn(CHUNK, int(spec["width"]), generator=g, dtype=torch.float32))
    return _LAST[seed][1]


def whole(spec: dict) -> torch.Tensor:
    """The parent's copy, in full."""
    return rows(spec, 0, int(spec["length"]))


def marker(spec: dict) -> dict:
    """What the parent sends in a call's arguments in place of the tensor."""
    return {"streamed": dict(spec)}


def receive(arg):
    """The child's side: a marker becomes a :class:`Streamed` tensor; anything else is returned as it is."""
    if isinstance(arg, dict) and isinstance(arg.get("streamed"), dict):
        spec = arg["streamed"]
        return Streamed(spec, 0, int(spec["length"]), torch.float32)
    return arg


class Streamed(torch.Tensor):
    """Rows [start, stop) of a streamed tensor, made when something computes with them."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, spec, start, stop, dtype):
        shape = (1, stop - start, int(spec["width"]))
        self = torch.Tensor._make_wrapper_subclass(cls, shape, dtype=dtype, device="cpu")
        self.spec, self.start, self.stop = spec, start, stop
        return self

    def __repr__(self):
        return f"Streamed(rows {self.start}..{self.stop} of {self.spec['length']}, dtype={self.dtype})"

    def made(self) -> torch.Tensor:
        return rows(self.spec, self.start, self.stop, self.dtype)

    def _part(self, start, stop, dtype=None):
        return Streamed(self.spec, self.start + start, self.start + stop, dtype or self.dtype)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self = args[0] if args and isinstance(args[0], Streamed) else None
        if self is not None:
            view = self._view(func, args[1:], kwargs)
            if view is not None:
                return view
        return func(*_made(args), **_made(kwargs))

    def _view(self, func, rest, kwargs):
        n = self.stop - self.start
        if func in (_aten.detach.default, _aten.alias.default, _aten.clone.default, _aten.lift_fresh.default):
            return self._part(0, n)
        if func is _aten._to_copy.default and set(kwargs) <= {"dtype"}:
            return self._part(0, n, kwargs.get("dtype"))
        if func in (_aten.view.default, _aten._unsafe_view.default) and _same_shape(rest[0], self.shape):
            # key.reshape(-1, S, E): the batch dimensions flattened, a view that moves no row
            return self._part(0, n)
        if func is _aten.slice.Tensor:
            dim, begin, end, step = list(rest) + [0, None, None, 1][len(rest):]
            dim = dim % 3
            begin, end = _bounds(begin, end, self.shape[dim])
            if step != 1:
                return None
            if dim == 1:
                return rows(self.spec, self.start + begin, self.start + end, self.dtype)  # the block, made
            if (begin, end) == (0, self.shape[dim]):
                return self._part(0, n)
            return None
        if func in (_aten.split.Tensor, _aten.split_with_sizes.default):
            sizes, dim = rest[0], rest[1] if len(rest) > 1 else kwargs.get("dim", 0)
            if dim % 3 != 1:
                return None
            if isinstance(sizes, int):
                sizes = [min(sizes, n - at) for at in range(0, n, sizes)] if sizes > 0 else [n]
            parts, at = [], 0
            for size in sizes:
                parts.append(self._part(at, at + size))
                at += size
            return parts
        return None


def _same_shape(size, shape) -> bool:
    """``size`` (a view's, one entry may be -1) is ``shape``."""
    size = list(size)
    if len(size) != len(shape) or size.count(-1) > 1:
        return False
    return all(s in (-1, n) for s, n in zip(size, shape))


def _bounds(begin, end, length):
    begin = 0 if begin is None else begin
    end = length if end is None else end
    begin = max(0, begin + length if begin < 0 else begin)
    end = min(length, end + length if end < 0 else end)
    return begin, max(begin, end)


def _made(value):
    if isinstance(value, Streamed):
        return value.made()
    if isinstance(value, (list, tuple)):
        return type(value)(_made(v) for v in value)
    if isinstance(value, dict):
        return {k: _made(v) for k, v in value.items()}
    return value
