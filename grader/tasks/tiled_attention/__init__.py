"""Task ``tiled_attention``: the forward pass in key blocks with an online softmax, memory measured."""
from .. import Grading, Task, with_common_checks


def build() -> Grading:
    import torch

    from . import checks as tiled, memory as tiled_memory
    from ...checks.base import Check
    from .bugs import CATALOGUE, wrong_outputs
    from .fingerprint import FINGERPRINT

    return Grading(fingerprint=FINGERPRINT, bugs=CATALOGUE, wrong_outputs=wrong_outputs, checks=with_common_checks([
        Check("output.shapes", tiled.shapes, 2),
        Check("output.block_sizes", tiled.block_extremes),
        Check("output.float64", tiled.float64),
        Check("dtype.float32", tiled.dtype_case(torch.float32)),
        Check("dtype.float64", tiled.dtype_case(torch.float64)),
        Check("online.rescale", tiled.rescale),
        # Only a loop over the keys stays within its memory: the online family's points rest on it.
        Check("online.key_streaming", tiled_memory.key_streaming, gates=("online",), seconds=tiled_memory.SECONDS),
        Check("stability.large_scores", tiled.large_scores),
        Check("memory.long_sequence", tiled_memory.long_sequence, seconds=tiled_memory.SECONDS),
    ]))


TASK = Task(
    id="tiled_attention", title="Tiled attention with an online softmax", function="tiled_attention",
    home=__file__, positional=4, keywords=(), arg_names=("query", "key", "value", "block_size"),
    points={"load": 5, "forbidden": 5, "output": 30, "dtype": 5, "online": 15, "stability": 10, "memory": 25,
            "inputs": 5},
    build=build, order=50,
    skill="an online softmax over blocks of keys, never the whole score matrix",
    budget=6.0,  # its memory cases each run the file in a fresh child (4.4x sdpa's CPU, measured by tasks validate)
    space={
        "blocks": {"S not a multiple of the block": lambda a, kw: a[1].size(-2) % a[3] != 0,
                   "one block of 1": lambda a, kw: a[3] == 1,
                   "a block as long as S": lambda a, kw: a[3] >= a[1].size(-2)},
        "dtype": {"float32": lambda a, kw: str(a[0].dtype) == "torch.float32",
                  "float64": lambda a, kw: str(a[0].dtype) == "torch.float64"},
    },
)
