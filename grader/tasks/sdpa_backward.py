"""Task ``sdpa_backward``: (dQ, dK, dV) of scaled dot-product attention by hand, autograd forbidden."""
from . import Grading, Task, with_common_checks


def build() -> Grading:
    import torch

    from ..checks import backward, forbidden
    from ..checks.base import Check

    return Grading(fingerprint=forbidden.BACKWARD_FINGERPRINT, checks=with_common_checks([
        Check("forbidden.autograd_source", backward.autograd_static),
        Check("output.shapes", backward.shapes, 2),
        Check("output.square", backward.square),
        Check("output.float64", backward.float64),
        Check("dtype.float32", backward.dtype_case(torch.float32)),
        Check("dtype.float64", backward.dtype_case(torch.float64)),
        Check("jacobian.peaked", backward.jacobian),
        Check("scale.default", backward.scale_default),
        Check("scale.argument", backward.scale_argument),
        Check("mask.bool", backward.mask_bool),
        Check("mask.float", backward.mask_float),
        Check("causal.square", backward.causal_square),
        Check("causal.rectangular", backward.causal_rectangular),
    ], post=(Check("forbidden.autograd_runtime", backward.autograd_runtime, post=True),)))


TASK = Task(
    id="sdpa_backward", title="Attention backward pass by hand", function="scaled_dot_product_attention_backward",
    home=__file__, positional=4, keywords=("attn_mask", "is_causal", "scale"),
    arg_names=("query", "key", "value", "grad_out"),
    points={"load": 5, "forbidden": 10, "output": 25, "dtype": 5, "jacobian": 15, "scale": 10, "mask": 15,
            "causal": 10, "inputs": 5},
    build=build, order=30, outputs=3, block=("autograd",),
)
