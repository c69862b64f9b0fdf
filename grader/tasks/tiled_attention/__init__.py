"""Task ``tiled_attention``: the forward pass in key blocks with an online softmax, memory measured."""
from .. import Grading, Task, with_common_checks

SKILL_FAMILIES = ("online", "stability", "memory")  # what streaming over the keys is verified to carry


def build() -> Grading:
    import torch

    from ...checks import diagnosis
    from . import space
    from . import edges
    from . import checks as tiled, memory as tiled_memory
    from ...checks.base import Check
    from .bugs import CATALOGUE, wrong_outputs
    from .fingerprint import FINGERPRINT

    return Grading(reference=diagnosis.attention_reference, fingerprint=FINGERPRINT, describe=space.describe, bugs=CATALOGUE, wrong_outputs=wrong_outputs, checks=with_common_checks([
        Check("output.shapes", tiled.shapes, 2),
        Check("output.block_sizes", tiled.block_extremes),
        Check("output.ragged_queries", edges.ragged_queries),
        Check("output.float64", tiled.float64),
        Check("dtype.float32", tiled.dtype_case(torch.float32)),
        Check("dtype.float64", tiled.dtype_case(torch.float64)),
        Check("online.rescale", tiled.rescale),
        # The skill: only a function that takes the keys block by block (they are made as it takes
        # them) stays within its memory. The online softmax's points, its stability's and its
        # memory's (60 of 100) rest on it.
        Check("online.key_streaming", tiled_memory.key_streaming, gates=SKILL_FAMILIES, seconds=tiled_memory.SECONDS),
        Check("stability.large_scores", tiled.large_scores),
        Check("memory.long_sequence", tiled_memory.long_sequence, seconds=tiled_memory.SECONDS),
    ]))


TASK = Task(
    id="tiled_attention", title="Tiled attention with an online softmax", function="tiled_attention",
    home=__file__, positional=4, keywords=(), arg_names=("query", "key", "value", "block_size"),
    points={"load": 5, "forbidden": 5, "output": 20, "dtype": 5, "online": 30, "stability": 10, "memory": 20,
            "inputs": 5},
    build=build, order=50,
    input_space={"key tiles": ("S a multiple of block_size", "ragged last key tile", "block_size = 1",
                               "block_size >= S"),
                 "query tiles": ("ragged last query tile, L > 32",), "dtype": ("float32", "float64"),
                 "logits": ("float32 above 88.7", "float64 beyond float32's range")},
    skill="an online softmax over blocks of keys, never the whole score matrix",
    budget=6.0,  # its memory cases each run the file in a fresh child (4.4x sdpa's CPU, measured by tasks validate)
)
