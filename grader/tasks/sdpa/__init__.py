"""Task ``sdpa``: scaled_dot_product_attention with torch's calling convention (no dropout)."""
from .. import Grading, Task, with_common_checks


def build() -> Grading:
    import torch

    from ...checks import (at_scale, gradients, masks, output, properties, scale, speed, stability,
                          weights)
    from ...checks.base import Check
    from .bugs import wrong_outputs
    from .fingerprint import FINGERPRINT

    return Grading(fingerprint=FINGERPRINT, wrong_outputs=wrong_outputs, checks=with_common_checks([
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
    skill="attention by hand: scaled scores, masks, a softmax over the keys, the weighted sum of the values",
    space={
        "mask": {"none": lambda a, kw: kw.get("attn_mask") is None and not kw.get("is_causal"),
                 "boolean": lambda a, kw: _mask(kw) is not None and str(_mask(kw).dtype) == "torch.bool",
                 "additive float": lambda a, kw: _mask(kw) is not None and _mask(kw).is_floating_point(),
                 "causal": lambda a, kw: bool(kw.get("is_causal"))},
        "lengths": {"L = S": lambda a, kw: a[0].size(-2) == a[1].size(-2),
                    "L != S": lambda a, kw: a[0].size(-2) != a[1].size(-2)},
        "value width": {"Ev != E": lambda a, kw: a[2].size(-1) != a[0].size(-1)},
        "scale": {"given": lambda a, kw: kw.get("scale") is not None},
        "dtype": {"float32": lambda a, kw: str(a[0].dtype) == "torch.float32",
                  "float64": lambda a, kw: str(a[0].dtype) == "torch.float64"},
    },
)
