"""Task ``sdpa``: scaled_dot_product_attention with torch's calling convention (no dropout)."""
from .. import Grading, Task, with_common_checks


def build() -> Grading:
    import torch

    from ...checks import diagnosis
    from . import space
    from ...checks import (at_scale, gradients, masks, output, properties, scale, speed, stability,
                          weights)
    from ...checks.base import Check
    from .bugs import wrong_outputs
    from .fingerprint import FINGERPRINT

    return Grading(reference=diagnosis.attention_reference, fingerprint=FINGERPRINT, describe=space.describe, wrong_outputs=wrong_outputs, checks=with_common_checks([
        Check("output.shapes", output.shapes, 2),
        Check("output.broadcast", output.broadcast),
        Check("output.fresh", output.fresh),
        Check("output.float64", output.float64),
        Check("dtype.float32", output.dtype_case(torch.float32)),
        Check("dtype.float64", output.dtype_case(torch.float64)),
        Check("scale.default", scale.sdpa_default, 2),
        Check("scale.argument", scale.sdpa_argument),
        Check("weights.distribution", weights.distribution, 3),
        Check("weights.value_shift", weights.value_shift, 2),
        Check("mask.bool_broadcast", masks.bool_broadcast),
        Check("mask.bool_per_batch", masks.bool_per_batch),
        Check("mask.float_additive", masks.float_additive),
        Check("mask.zero_weight", masks.zero_weight),
        Check("causal.square", masks.causal_square),
        Check("causal.rectangular", masks.causal_rectangular),
        Check("causal.future", masks.causal_future),
        Check("stability.float32", stability.float32),
        Check("stability.float64", stability.float64),
        Check("batch.independent", properties.sdpa_batch),
        Check("grad.reference", gradients.sdpa_reference),
        Check("grad.gradcheck", gradients.sdpa_gradcheck, needs=("batch.independent",)),
        Check("grad.at_scale", at_scale.sdpa_task, 0, needs=("grad.reference",), gates=("grad",)),
        Check("permutation.keys_queries", properties.permutation),
        Check("fully_masked.zeros", properties.fully_masked),
        Check("speed.relative", speed.speed),
        Check("precision.float64", output.precision),
    ]))


def _mask(kwargs):
    return kwargs.get("attn_mask")


TASK = Task(
    id="sdpa", title="Scaled dot-product attention", function="scaled_dot_product_attention", home=__file__,
    positional=3, keywords=("attn_mask", "is_causal", "scale"), arg_names=("query", "key", "value"),
    points={"load": 5, "forbidden": 5, "output": 20, "dtype": 5, "scale": 15, "weights": 5, "mask": 15,
            "causal": 10, "stability": 5, "batch": 3, "grad": 10, "inputs": 2,
            "permutation": 0, "fully_masked": 0, "speed": 0, "precision": 0},
    build=build, order=10, gpu_suite=True,
    input_space={"dims": ("3-D", "4-D", "a size-1 batch dimension"), "lengths": ("L < S", "L > S", "L = S"),
                 "mask": ("none", "boolean", "float", "causal"), "dtype": ("float32", "float64"),
                 "logits": ("float32 above 88.7", "float64 above 709.8")},
    skill="attention by hand: scaled scores, masks, a softmax over the keys, the weighted sum of the values",
)
