"""Task ``kv_cache_attention``: one decoding step of masked self-attention with a key/value cache."""
from .. import Edges, Grading, Task, with_common_checks


def build() -> Grading:
    import torch

    from . import checks as kv
    from ...checks.base import Check
    from .bugs import CATALOGUE, diagnosis_reference, wrong_outputs
    from .fingerprint import FINGERPRINT

    return Grading(reference=diagnosis_reference, fingerprint=FINGERPRINT, describe=EDGES, bugs=CATALOGUE, wrong_outputs=wrong_outputs, checks=with_common_checks([
        Check("output.step", kv.step_float32, 2),
        Check("output.float64", kv.step_float64),
        Check("dtype.float32", kv.dtype_case(torch.float32)),
        Check("dtype.float64", kv.dtype_case(torch.float64)),
        Check("cache.first_step", kv.first_step),
        Check("cache.last_slot", kv.last_slot),
        Check("padding.stale", kv.stale_padding),
        Check("padding.zeros", kv.zero_padding),
        Check("scale.default", kv.scale_default),
        Check("steps.decode", kv.decode),
    ]))


def _position(args):
    return args[5]


def _rows(args):
    return args[3].size(1)


def _padding(args):
    """The padded rows of the key cache (after the ones filled by earlier steps)."""
    return args[3][:, _position(args):]


# axis -> {edge: predicate}: what the spec says a step must handle, each drawn by a scored case
EDGES = Edges({
    "position": {"0 (an empty cache)": lambda a, kw: _position(a) == 0,
                 "inside the cache": lambda a, kw: 0 < _position(a) < _rows(a) - 1,
                 "N - 1 (the last free row)": lambda a, kw: _position(a) == _rows(a) - 1},
    "padding": {"zeros": lambda a, kw: _padding(a).numel() > 0 and bool((_padding(a) == 0).all()),
                "stale values": lambda a, kw: _padding(a).numel() > 0 and bool((_padding(a) != 0).all())},
    "batch": {"1": lambda a, kw: a[0].size(0) == 1, "several": lambda a, kw: a[0].size(0) > 1},
    "dtype": {"float32": lambda a, kw: str(a[0].dtype) == "torch.float32",
              "float64": lambda a, kw: str(a[0].dtype) == "torch.float64"},
    "value width": {"Dv != D": lambda a, kw: a[2].size(-1) != a[0].size(-1)},
})

TASK = Task(
    id="kv_cache_attention", title="One decoding step with a key/value cache", function="kv_cache_attention",
    home=__file__, positional=6, keywords=(),
    arg_names=("query", "key", "value", "k_cache", "v_cache", "position"),
    points={"load": 5, "forbidden": 5, "output": 20, "dtype": 5, "cache": 20, "padding": 15, "scale": 5,
            "steps": 20, "inputs": 5},
    build=build, order=50, outputs=3,
    skill="decoding one token at a time: append the new key and value to the cache, then attend over it",
    input_space=EDGES.names,
)
