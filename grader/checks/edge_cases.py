"""What the checks for edges of the input space that real bugs live on share: naming an overflow.
The checks themselves are in their tasks' folders (``grader/tasks/<id>/edges.py``):

- ``sdpa_backward``: float64 scores beyond float32's range (about 1e40): a backward computed in
  float32 inside, or one that exponentiates without subtracting the row maximum, gives NaN.
- ``decoder_attention``: float64 logits above 709.8 (a softmax without the row maximum
  overflows), and a padded batch in which no sequence fills the padded length (a mask sized by
  the longest sequence no longer fits the tensors).
- ``tiled_attention``: a last query tile cut short, L > 32 and not a multiple of block_size.

Each edge is also declared in its task's ``input_space`` (grader/checks/input_space.py).
"""
from __future__ import annotations

import torch

from .base import Fail
from .variants import explain
from ..i18n import T

# The overflow names are diagnosis.py's (diagnosis_texts.py, with their family: stability).


def _named_overflow(ctx, miss: Fail, name: str, tame, dtype_bug=None) -> Fail:
    """``miss`` with the overflow named, when its wrong values are NaN or inf where the reference is
    finite and the same call with small logits (``tame``: the case's arguments with the scores
    scaled down) comes back finite: then the size of the scores is what broke it. A bug that gives
    NaN whatever the scores keeps the name the variants gave it."""
    if not miss.details.get("nonfinite"):
        return miss
    try:
        args = tame()
        result = ctx.call(*args, during=T("the same inputs with small scores"))
        outs = result.output if isinstance(result.output, tuple) else (result.output,)
        finite = all(isinstance(o, torch.Tensor) and bool(torch.isfinite(o).all()) for o in outs)
    except Exception:  # raised or crashed there too: not the overflow's doing
        return miss
    if not finite:
        return miss
    if dtype_bug and any(isinstance(o, torch.Tensor) and o.dtype != args[0].dtype for o in outs):
        # Computed in float32 and returned so: the dtype family's bug, which this overflow follows from.
        return Fail(T("{what}: NaN or infinite values, and your outputs are not in the inputs' dtype. Likely "
                      "cause: {cause}.", what=miss.details.get("case", ""), cause=explain(dtype_bug)),
                    {**miss.details, "diagnosis": dtype_bug, "causes": {}})
    wrong = ", ".join(miss.details.get("wrong") or ())
    return Fail(T("{what}: {wrong} NaN or infinite where the reference is finite, and finite with small scores. "
                  "Likely cause: {cause}.", what=miss.details.get("case", ""), wrong=wrong, cause=explain(name)),
                {**miss.details, "diagnosis": name, "causes": {}})
