"""Trusted reference functions for the short-code questions, and their test inputs.

A code question names one of these by ``reference:``; the student's snippet runs in the
sandbox and its output is compared with the reference computed here, in the parent.
Keeping the references in Python (not in the YAML) means the bank never carries code
that the parent process would execute.
"""
from __future__ import annotations

import math

import torch

from .cases import REFERENCE_NAMES, check_case


def causal_mask(L: int, S: int) -> torch.Tensor:
    # (L, S) bool, True = may attend; top-left aligned like torch's is_causal
    return torch.ones(L, S, dtype=torch.bool).tril()


def scaled_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    # q: (..., L, d_k), k: (..., S, d_k) -> (..., L, S)
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def split_heads(x: torch.Tensor, h: int) -> torch.Tensor:
    # (B, T, d_model) -> (B, h, T, d_model // h)
    B, T, d_model = x.shape
    return x.view(B, T, h, d_model // h).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    # (B, h, T, d_k) -> (B, T, h * d_k)
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


def masked_scores(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # mask True = may attend; disallowed scores become -inf so softmax gives them 0
    return scores.masked_fill(~mask, float("-inf"))


def attention_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    # softmax over keys of the scaled scores: (..., L, S), rows sum to one
    return torch.softmax(scaled_scores(q.double(), k.double()), dim=-1).to(q.dtype)


REFERENCES = {f.__name__: f for f in (causal_mask, scaled_scores, split_heads, merge_heads,
                                      masked_scores, attention_weights)}
assert set(REFERENCES) == set(REFERENCE_NAMES), "keep cases.REFERENCE_NAMES in step"


def build_args(case: dict, seed: int) -> list:
    """Turn a case from the YAML into concrete arguments (see :func:`check_case` for the forms),
    drawn from a generator seeded by ``seed`` so that one variant always sees the same tensors."""
    check_case(case)
    gen = torch.Generator().manual_seed(seed % (2 ** 63))
    return [_build(a, gen) for a in case["args"]]


def _build(arg, gen: torch.Generator):
    if isinstance(arg, (int, float)):
        return arg
    (kind, spec), = arg.items()
    if kind == "randn":
        return torch.randn(spec, generator=gen)
    if kind == "randint":
        low, high, shape = spec
        return torch.randint(low, high, shape, generator=gen)
    mask = torch.rand(spec, generator=gen) < 0.6
    mask[..., 0] = True  # no fully masked row: softmax over it would be undefined
    return mask
