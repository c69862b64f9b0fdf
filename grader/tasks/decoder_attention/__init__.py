"""Task ``decoder_attention``: causal self-attention and cross-attention over a padded batch."""
from .. import Grading, Task, with_common_checks


def build() -> Grading:
    import torch

    from . import checks as decoder
    from . import space
    from . import edges
    from ...checks.base import Check
    from .bugs import CATALOGUE, wrong_outputs
    from .fingerprint import FINGERPRINT

    return Grading(reference=decoder.diagnosis_reference, fingerprint=FINGERPRINT, describe=space.describe, bugs=CATALOGUE, wrong_outputs=wrong_outputs, checks=with_common_checks([
        Check("output.shapes", decoder.shapes, 2),
        Check("output.float64", decoder.float64),
        Check("dtype.float32", decoder.dtype_case(torch.float32)),
        Check("dtype.float64", decoder.dtype_case(torch.float64)),
        Check("padding.target", decoder.padding_target),
        Check("padding.memory", decoder.padding_memory),
        Check("padding.no_full_row", edges.no_full_row),
        Check("causal.self", decoder.causal_self),
        Check("cross.not_causal", decoder.cross_not_causal),
        Check("lengths.edges", decoder.length_edges),
        Check("stability.large_scores", edges.large_scores),
    ]))


TASK = Task(
    id="decoder_attention", title="Decoder attention over a padded batch", function="decoder_attention",
    home=__file__, positional=4, keywords=(), arg_names=("target", "memory", "target_lengths", "memory_lengths"),
    points={"load": 5, "forbidden": 5, "output": 20, "dtype": 5, "padding": 25, "causal": 10, "cross": 10,
            "lengths": 10, "stability": 5, "inputs": 5},
    build=build, order=40, outputs=2,
    input_space={"target padding": ("none", "a full-length row", "no full-length row", "a length of 1"),
                 "memory padding": ("none", "a full-length row", "no full-length row", "a length of 1"),
                 "dtype": ("float32", "float64"), "logits": ("float64 above 709.8",)},
    concepts={"masking": ("padding", "causal", "lengths")},
    skill="masks built from lengths: the padding of both sequences and the causal mask of the self-attention",
)
