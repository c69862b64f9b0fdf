"""Task ``mha``'s bug catalogue: attention's own (``grader/checks/variants.py``), and its wrong outputs
on one call, for ``attn-grader tasks validate``."""
from __future__ import annotations

from ...checks.variants import ATTENTION as CATALOGUE, mha_variants  # noqa: F401  (CATALOGUE: Task.bugs)


def wrong_outputs(args, kwargs) -> tuple:
    """(the right output, {bug: the output with that bug}) on one call's arguments, in float64."""
    from reference_impl import multi_head_attention
    x_q, x_kv, *ws, heads = args
    x_q, x_kv, ws = x_q.double(), x_kv.double(), [w.double() for w in ws]
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    causal = kwargs.get("is_causal", False)
    right = multi_head_attention(x_q, x_kv, *ws, heads, attn_mask=mask, is_causal=causal)
    return right, mha_variants(x_q, x_kv, ws, heads, mask, causal)
