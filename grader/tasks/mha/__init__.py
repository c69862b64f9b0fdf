"""Task ``mha``: multi-head attention from four projection matrices."""
from .. import Grading, Task, with_common_checks


def build() -> Grading:
    import torch

    from ...checks import diagnosis
    from . import space
    from ...checks import gradients, heads, masks, properties, scale
    from ...checks.base import Check
    from .bugs import wrong_outputs
    from .fingerprint import FINGERPRINT

    return Grading(reference=diagnosis.mha_reference, fingerprint=FINGERPRINT, describe=space.describe, wrong_outputs=wrong_outputs, checks=with_common_checks([
        Check("output.self_attention", heads.self_attention),
        Check("output.cross_attention", heads.cross_attention),
        Check("output.float64", heads.float64),
        Check("output.fresh", heads.fresh),
        Check("dtype.float32", heads.dtype_case(torch.float32)),
        Check("dtype.float64", heads.dtype_case(torch.float64)),
        Check("heads.single_head", heads.single_head),
        Check("heads.split_merge", heads.split_merge, 3, needs=("heads.single_head",)),
        Check("scale.default", scale.mha_default),
        Check("mask.bool", masks.mha_bool),
        Check("mask.float", masks.mha_float),
        Check("causal.square", masks.mha_causal_square),
        Check("causal.rectangular", masks.mha_causal_rectangular),
        Check("batch.independent", properties.mha_batch),
        Check("grad.reference", gradients.mha_reference),
        Check("grad.gradcheck", gradients.mha_gradcheck),
        Check("precision.float64", heads.precision),
    ]))


TASK = Task(
    id="mha", title="Multi-head attention", function="multi_head_attention", home=__file__,
    positional=7, keywords=("attn_mask", "is_causal"),
    arg_names=("x_q", "x_kv", "w_q", "w_k", "w_v", "w_o", "num_heads"),
    points={"load": 5, "forbidden": 5, "output": 20, "dtype": 5, "heads": 20, "scale": 15, "mask": 10,
            "causal": 10, "batch": 3, "grad": 5, "inputs": 2, "precision": 0},
    build=build, order=20,
    input_space={"heads": ("1", "more than 1"), "lengths": ("L < S", "L = S"),
                 "mask": ("none", "boolean", "float", "causal"), "dtype": ("float32", "float64")},
    skill="splitting the features into heads, attending per head, and merging the heads back",
)
