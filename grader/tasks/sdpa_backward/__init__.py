"""Task ``sdpa_backward``: (dQ, dK, dV) of scaled dot-product attention by hand, autograd forbidden."""
from .. import Grading, Task, with_common_checks

# The families whose points rest on the gradients coming from a backward pass (grad.at_scale, which
# has no points of its own: it only shows that they do).
GRADIENT_FAMILIES = ("output", "dtype", "jacobian", "scale", "mask", "causal", "stability")
# The backward by hand is the task: unless grad.at_scale shows one, nothing scores, not even loading
# and the bans (finite differences of a forward kept those 20 points).
GATED_FAMILIES = GRADIENT_FAMILIES + ("inputs", "forbidden", "load")


def build() -> Grading:
    import torch

    from . import space
    from . import edges
    from ...checks import autograd_ban
    from . import at_scale
    from . import checks as backward
    from ...checks.base import Check
    from .bugs import CATALOGUE, wrong_outputs
    from .fingerprint import FINGERPRINT

    right = backward.OUTPUT_CHECKS  # the property checks judge the gradients these found right
    return Grading(reference=backward.diagnosis_reference, fingerprint=FINGERPRINT, describe=space.describe, bugs=CATALOGUE, wrong_outputs=wrong_outputs, checks=with_common_checks([
        Check("forbidden.autograd_source", autograd_ban.static_check),
        *(Check(check_id, backward.output_check(name)) for check_id, name in zip(right, backward.NAMES)),
        Check("dtype.float32", backward.dtype_case(torch.float32)),
        Check("dtype.float64", backward.dtype_case(torch.float64)),
        Check("grad.at_scale", at_scale.backward_task, 0, needs=right, gates=GATED_FAMILIES),
        Check("jacobian.peaked", backward.jacobian, needs=right),
        Check("scale.default", backward.scale_default, needs=right),
        Check("scale.argument", backward.scale_argument, needs=right),
        Check("mask.bool", backward.mask_bool, needs=right),
        Check("mask.float", backward.mask_float, needs=right),
        Check("causal.square", backward.causal_square, needs=right),
        Check("causal.rectangular", backward.causal_rectangular, needs=right),
        Check("stability.large_scores", edges.large_scores, needs=right),
    ], post=(Check("forbidden.autograd_runtime", autograd_ban.runtime_check, post=True),)))


def _mask(kwargs):
    return kwargs.get("attn_mask")


TASK = Task(
    id="sdpa_backward", title="Attention backward pass by hand", function="scaled_dot_product_attention_backward",
    home=__file__, positional=4, keywords=("attn_mask", "is_causal", "scale"),
    arg_names=("query", "key", "value", "grad_out"),
    points={"load": 5, "forbidden": 10, "output": 25, "dtype": 5, "jacobian": 10, "scale": 10, "mask": 15,
            "causal": 10, "stability": 5, "inputs": 5, "grad": 0},
    build=build, order=30, outputs=3, block=("autograd",),
    input_space={"dims": ("3-D", "4-D"), "lengths": ("L < S", "L > S", "L = S"), "mask": ("none", "boolean", "float", "causal"),
                 "dtype": ("float32", "float64"), "logits": ("float64 above 709.8", "float64 beyond float32's range")},
    skill="the backward pass by hand: the softmax's Jacobian and the chain rule, without autograd",
)
