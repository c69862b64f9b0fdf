"""Task ``sdpa_backward``: (dQ, dK, dV) of scaled dot-product attention by hand, autograd forbidden."""
from .. import Grading, Task, with_common_checks

# The families whose points rest on the gradients coming from a backward pass (grad.at_scale, which
# has no points of its own: it only shows that they do).
GRADIENT_FAMILIES = ("output", "dtype", "jacobian", "scale", "mask", "causal")


def build() -> Grading:
    import torch

    from ...checks import at_scale, autograd_ban
    from . import checks as backward
    from ...checks.base import Check
    from .bugs import CATALOGUE, wrong_outputs
    from .fingerprint import FINGERPRINT

    right = backward.OUTPUT_CHECKS  # the property checks judge the gradients these found right
    return Grading(fingerprint=FINGERPRINT, bugs=CATALOGUE, wrong_outputs=wrong_outputs, checks=with_common_checks([
        Check("forbidden.autograd_source", autograd_ban.static_check),
        *(Check(check_id, backward.output_check(name)) for check_id, name in zip(right, backward.NAMES)),
        Check("dtype.float32", backward.dtype_case(torch.float32)),
        Check("dtype.float64", backward.dtype_case(torch.float64)),
        Check("grad.at_scale", at_scale.backward_task, 0, needs=right, gates=GRADIENT_FAMILIES),
        Check("jacobian.peaked", backward.jacobian, needs=right),
        Check("scale.default", backward.scale_default, needs=right),
        Check("scale.argument", backward.scale_argument, needs=right),
        Check("mask.bool", backward.mask_bool, needs=right),
        Check("mask.float", backward.mask_float, needs=right),
        Check("causal.square", backward.causal_square, needs=right),
        Check("causal.rectangular", backward.causal_rectangular, needs=right),
    ], post=(Check("forbidden.autograd_runtime", autograd_ban.runtime_check, post=True),)))


def _mask(kwargs):
    return kwargs.get("attn_mask")


TASK = Task(
    id="sdpa_backward", title="Attention backward pass by hand", function="scaled_dot_product_attention_backward",
    home=__file__, positional=4, keywords=("attn_mask", "is_causal", "scale"),
    arg_names=("query", "key", "value", "grad_out"),
    points={"load": 5, "forbidden": 10, "output": 25, "dtype": 5, "jacobian": 15, "scale": 10, "mask": 15,
            "causal": 10, "inputs": 5, "grad": 0},
    build=build, order=30, outputs=3, block=("autograd",),
    skill="the backward pass by hand: the softmax's Jacobian and the chain rule, without autograd",
    space={
        "mask": {"none": lambda a, kw: kw.get("attn_mask") is None and not kw.get("is_causal"),
                 "boolean": lambda a, kw: _mask(kw) is not None and str(_mask(kw).dtype) == "torch.bool",
                 "additive float": lambda a, kw: _mask(kw) is not None and _mask(kw).is_floating_point(),
                 "causal": lambda a, kw: bool(kw.get("is_causal"))},
        "lengths": {"L != S": lambda a, kw: a[0].size(-2) != a[1].size(-2)},
        "scale": {"given": lambda a, kw: kw.get("scale") is not None},
        "dtype": {"float32": lambda a, kw: str(a[0].dtype) == "torch.float32",
                  "float64": lambda a, kw: str(a[0].dtype) == "torch.float64"},
    },
)
