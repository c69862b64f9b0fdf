"""Task ``sdpa``'s bug catalogue: attention's own (``grader/checks/variants.py``), and its wrong outputs
on one call, for ``attn-grader tasks validate``."""
from __future__ import annotations

from ...checks.variants import ATTENTION as CATALOGUE, sdpa_variants  # noqa: F401  (CATALOGUE: Task.bugs)


def wrong_outputs(args, kwargs) -> tuple:
    """(the right output, {bug: the output with that bug}) on one call's arguments, in float64."""
    from reference_impl import scaled_dot_product_attention
    q, k, v = (t.double() for t in args[:3])
    kwargs = {key: value.double() if key == "attn_mask" and value is not None and value.is_floating_point()
              else value for key, value in kwargs.items()}
    return scaled_dot_product_attention(q, k, v, **kwargs), sdpa_variants(q, k, v, **kwargs)
