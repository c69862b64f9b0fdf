"""The test-call format of code questions, checked without importing torch.

A case is ``{args: [...]}``; an argument is a plain number, or one of ``{randn: shape}``,
``{randint: [low, high, shape]}`` and ``{mask: shape}`` (random booleans, at least one True
per row). :mod:`questions.references` turns cases into tensors; this module only checks them,
so that loading and listing the bank stays free of torch.
"""
from __future__ import annotations

# the trusted reference functions in questions.references, by name
REFERENCE_NAMES = ("causal_mask", "scaled_scores", "split_heads", "merge_heads", "masked_scores",
                   "attention_weights")


def _check_shape(spec) -> None:
    if not isinstance(spec, list) or not spec or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 < n <= 64 for n in spec):
        raise ValueError(f"a shape must be a non-empty list of sizes 1..64, got {spec!r}")


def check_case(case) -> None:
    """Raise ValueError with a readable message when ``case`` is not a valid test call."""
    if not isinstance(case, dict) or set(case) != {"args"} or not isinstance(case["args"], list):
        raise ValueError("a case must be {args: [...]}")
    for arg in case["args"]:
        if isinstance(arg, bool) or arg is None:
            raise ValueError(f"unsupported argument {arg!r}")
        if isinstance(arg, (int, float)):
            continue
        if not isinstance(arg, dict) or len(arg) != 1:
            raise ValueError(f"an argument is a number or one of randn/randint/mask, got {arg!r}")
        (kind, spec), = arg.items()
        if kind in ("randn", "mask"):
            _check_shape(spec)
        elif kind == "randint":
            if not isinstance(spec, list) or len(spec) != 3 or not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in spec[:2]) or spec[0] >= spec[1]:
                raise ValueError(f"randint takes [low, high, shape] with low < high, got {spec!r}")
            _check_shape(spec[2])
        else:
            raise ValueError(f"unknown argument kind {kind!r}; use randn, randint or mask")
