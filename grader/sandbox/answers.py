"""The one place where an answer from the child is checked, before anything in the parent reads it.

The child is the student's process: it can write any frame to the answer channel, from
any thread, at any time (at import, say, before the harness answers). ``wire`` already
refuses frames that are malformed, too deep, or larger than the byte budget the parent
set for the request. Here every field of a decoded answer is checked for type, size and
shape against the request it answers; anything else raises :class:`ProtocolViolation`,
which the session turns into a failing check that says the program wrote to the
grader's channel. Nothing downstream ever indexes an unchecked answer.
"""
from __future__ import annotations

import math

import torch

TEXT_LIMIT = 8000          # characters of any message or traceback kept from the child
OPS_LIMIT = 2000           # traced operation names per call
NAME_LIMIT = 200
MAX_OUTPUTS = 8            # tensors in a tuple output (harness.MAX_OUTPUTS)


class ProtocolViolation(Exception):
    """The child's answer is not one the harness would send for this request."""


def _text(value, what: str, limit: int = TEXT_LIMIT, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ProtocolViolation(f"{what} is a {type(value).__name__}, not text")
    return value[:limit]


def _strings(value, what: str, limit: int) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > limit:
        raise ProtocolViolation(f"{what} is not a list of at most {limit} names")
    return [_text(v, what, NAME_LIMIT, required=True) for v in value]


def _error(value) -> dict:
    if not isinstance(value, dict):
        raise ProtocolViolation("an error report is not an object")
    out = {"type": _text(value.get("type"), "error type", NAME_LIMIT),
           "message": _text(value.get("message"), "error message"),
           "traceback": _text(value.get("traceback"), "traceback")}
    if "defined" in value:
        out["defined"] = _strings(value.get("defined"), "defined names", 50)
    return out


def _common(answer) -> tuple[bool, list[str]]:
    if not isinstance(answer, dict):
        raise ProtocolViolation("an answer is not an object")
    ok = answer.get("ok")
    if not isinstance(ok, bool):
        raise ProtocolViolation("an answer has no ok flag")
    return ok, _strings(answer.get("blocked"), "blocked attempts", 100)


def check_load(answer) -> dict:
    """A load answer as {ok, blocked, params | stage + error}."""
    ok, blocked = _common(answer)
    if not ok:
        stage = _text(answer.get("stage"), "stage", 20)
        return {"ok": False, "blocked": blocked, "stage": stage, "error": _error(answer.get("error"))}
    params = answer.get("params")
    if params is not None:
        if not isinstance(params, list) or len(params) > 64:
            raise ProtocolViolation("the parameter list is not a list of at most 64 entries")
        kinds = {"POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD"}
        checked = []
        for p in params:
            if not isinstance(p, dict) or p.get("kind") not in kinds or not isinstance(p.get("has_default"), bool):
                raise ProtocolViolation("a parameter entry is malformed")
            checked.append({"name": _text(p.get("name"), "parameter name", NAME_LIMIT, required=True),
                            "kind": p["kind"], "has_default": p["has_default"],
                            "default": _text(p.get("default"), "parameter default", NAME_LIMIT)})
        params = checked
    return {"ok": True, "blocked": blocked, "params": params}


def _tensor(value, what: str, max_numel: int) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise ProtocolViolation(f"{what} is not a tensor")
    if value.numel() > max_numel:
        raise ProtocolViolation(f"{what} has {value.numel()} elements, more than any answer to this request")
    return value


def check_call(answer, args: list, kwargs: dict, wrt: list, echo: bool, outputs: int = 1) -> dict:
    """A call answer, checked against the request it answers (what was sent, what was asked).

    ``outputs`` > 1 means the task's function returns that many tensors: the output may then be
    a list of tensors (a tuple in the parent); otherwise it is one tensor or nothing.
    """
    ok, blocked = _common(answer)
    if not ok:
        return {"ok": False, "blocked": blocked, "error": _error(answer.get("error"))}
    out = {"ok": True, "blocked": blocked, "output": None,
           "output_type": _text(answer.get("output_type"), "output type", NAME_LIMIT),
           "output_device": _text(answer.get("output_device"), "output device", 40),
           "requires_grad": answer.get("requires_grad") is True,
           "ops": _strings(answer.get("ops"), "traced operations", OPS_LIMIT),
           "elapsed": 0.0, "grads": None, "grad_error": None, "inputs_after": None}
    output = answer.get("output")
    if isinstance(output, list) and outputs > 1:
        # A tuple of tensors, for a task that asked for one: how many and which shapes is the
        # student's business (the checks report it); that they are tensors is the harness's.
        if not 0 < len(output) <= MAX_OUTPUTS:
            raise ProtocolViolation(f"the output is a list of {len(output)} items; the harness sends 1 to "
                                    f"{MAX_OUTPUTS} tensors")
        out["output"] = tuple(_tensor(t, f"output {i}", 1 << 62) for i, t in enumerate(output))
    elif output is not None:
        # Any size wire let through: a wrong shape is the student's bug, reported by the checks.
        out["output"] = _tensor(output, "the output", 1 << 62)
    elapsed = answer.get("elapsed")
    if isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) and math.isfinite(elapsed):
        out["elapsed"] = max(0.0, float(elapsed))
    if wrt:
        grads = answer.get("grads")
        if grads is not None:
            if not isinstance(grads, list) or len(grads) != len(wrt):
                raise ProtocolViolation(f"{len(wrt)} gradients were asked for, the answer carries "
                                        f"{len(grads) if isinstance(grads, list) else 'no list of them'}")
            checked = []
            for i, g in zip(wrt, grads):
                if g is None:
                    checked.append(None)
                    continue
                g = _tensor(g, f"gradient {i}", args[i].numel())
                if tuple(g.shape) != tuple(args[i].shape) or not g.is_floating_point():
                    raise ProtocolViolation(f"gradient {i} has shape {tuple(g.shape)} and dtype {g.dtype}; "
                                            f"the input has shape {tuple(args[i].shape)}")
                checked.append(g)
            out["grads"] = checked
        err = answer.get("grad_error")
        if isinstance(err, dict):
            out["grad_error"] = _error(err)
        elif err is not None:
            out["grad_error"] = _text(err, "gradient error")
    sent = _sent(args, kwargs)
    if echo:
        after = answer.get("inputs_after")
        if not isinstance(after, list) or len(after) != len(sent):
            raise ProtocolViolation("the inputs were asked back and the answer does not carry them")
        for i, (a, s) in enumerate(zip(after, sent)):
            a = _tensor(a, f"input {i} after the call", s.numel())
            if tuple(a.shape) != tuple(s.shape):
                raise ProtocolViolation(f"input {i} came back with shape {tuple(a.shape)}, sent as "
                                        f"{tuple(s.shape)}")
        out["inputs_after"] = after
    return out


def _sent(args: list, kwargs: dict) -> list:
    return [a for a in args if isinstance(a, torch.Tensor)] + [v for v in kwargs.values()
                                                              if isinstance(v, torch.Tensor)]


def byte_budget(args: list, kwargs: dict) -> int:
    """The largest frame the parent reads in answer to this request (wire refuses more, unread).

    Generous for honest answers, wrong ones included (an output with an extra dimension of
    the sequence length, gradients, the echoed inputs), and far below what a forged frame
    could otherwise make the parent allocate.
    """
    numel = sum(t.numel() for t in _sent(args, kwargs))
    return 8 * 64 * numel + (16 << 20)
