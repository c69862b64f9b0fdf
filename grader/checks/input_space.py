"""What each call fed the submission, as points of its task's declared input space.

A task declares the axes its inputs vary on and the edge values of each (``Task.input_space``:
axis -> edges), the inputs where real bugs live: a float64 logit past exp()'s overflow, a last
query tile cut short, a padded batch in which no sequence is full length. Its ``describe``
function (``Grading.describe``, in the task's folder: ``space.py``, or an ``Edges`` of predicates)
reads one call's arguments and says which edges they stand on (the helpers below name the edges
several tasks share);
``Context.call`` records that for every call, so a grading can show that every declared edge was
met by a scored case (``drawn_edges``), and a crash can be traced to the input property that
every failing call had and no answered call had (``grader/checks/diagnosis.py``).

Only the parent's own tensors are read: nothing here depends on what the submission did.
"""
from __future__ import annotations

import math

import torch

F32_EXP = math.log(torch.finfo(torch.float32).max)   # 88.7: exp() of more is inf in float32
F64_EXP = math.log(torch.finfo(torch.float64).max)   # 709.8: exp() of more is inf in float64
F32_MAX = torch.finfo(torch.float32).max              # 3.4e38: float32's largest
LOGITS_LIMIT = 1 << 20  # larger score matrices (the memory cases) are not computed here


def _tensors(args) -> list:
    return [a for a in args if isinstance(a, torch.Tensor)]


def dims(q, *others) -> list[str]:
    out = [f"{q.dim()}-D"]
    if any(1 in t.shape[:-2] for t in (q, *others)):
        out.append("a size-1 batch dimension")
    return out


def lengths(L: int, S: int) -> str:
    return "L = S" if L == S else ("L < S" if L < S else "L > S")


def logits(q, k, scale=None) -> list[str]:
    """The magnitude edges the scores q·kᵀ·scale reach (float64 arithmetic; small cases only)."""
    if not (q.is_floating_point() and k.is_floating_point()) or \
            q.shape[:-1].numel() * k.size(-2) > LOGITS_LIMIT:
        return []
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    top = float((q.double() @ k.double().transpose(-2, -1)).abs().max()) * abs(scale)
    out = []
    if q.dtype == torch.float32 and top > F32_EXP:
        out.append("float32 above 88.7")
    if q.dtype == torch.float64 and top > F64_EXP:
        out.append("float64 above 709.8")
    if q.dtype == torch.float64 and top > F32_MAX:
        out.append("float64 beyond float32's range")
    return out


def dtype(t) -> list[str]:
    return [str(t.dtype).replace("torch.", "")]


def mask_edges(kwargs) -> list[str]:
    mask = kwargs.get("attn_mask")
    if kwargs.get("is_causal"):
        return ["causal"]
    if mask is None:
        return ["none"]
    out = ["boolean" if mask.dtype == torch.bool else "float"]
    hidden = ~mask if mask.dtype == torch.bool else torch.isneginf(mask)
    if bool(hidden.all(-1).any()):
        out.append("a fully masked row")
    return out


def padding(lengths, n) -> list[str]:
    lengths = lengths.tolist()
    if all(x == n for x in lengths):
        return ["none"]
    out = ["a full-length row" if n in lengths else "no full-length row"]
    if 1 in lengths:
        out.append("a length of 1")
    return out


def attention(q, k, v, kwargs) -> dict:
    """The edges of one attention call with torch's keywords (``sdpa``, and the forward that
    ``sdpa_backward`` differentiates)."""
    return {"dims": dims(q, k, v), "lengths": [lengths(q.size(-2), k.size(-2))], "mask": mask_edges(kwargs),
            "dtype": dtype(q), "logits": logits(q, k, kwargs.get("scale"))}


def describe(ctx, args, kwargs) -> dict:
    """The edges one call stands on (empty where the task declares none, or on a grader error:
    what is recorded here is reporting, never a verdict)."""
    fn = getattr(ctx.task, "describe", None)
    if fn is None or len(_tensors(args)) < 2:
        return {}
    try:
        return {axis: list(labels) for axis, labels in fn(args, kwargs).items() if labels}
    except Exception:
        return {}


def drawn_edges(task, calls, scored: set) -> dict:
    """axis -> the declared edges that some call of a scored check (``scored``: check ids) stood on."""
    out = {axis: [] for axis in task.input_space}
    for check_id, props, _ in calls:
        if check_id not in scored:
            continue
        for axis, labels in props.items():
            for label in labels:
                if axis in out and label in task.input_space[axis] and label not in out[axis]:
                    out[axis].append(label)
    return {axis: [e for e in task.input_space[axis] if e in got] for axis, got in out.items()}


def missing_edges(task, drawn: dict) -> list[str]:
    """The declared edges no scored case met, as "axis: edge"."""
    return [f"{axis}: {edge}" for axis, edges in task.input_space.items() for edge in edges
            if edge not in drawn.get(axis, ())]
