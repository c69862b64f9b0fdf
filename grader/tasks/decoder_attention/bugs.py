"""Known wrong decoder layers, computed in the trusted parent to name a student's bug.

A decoder layer is two attentions over a padded batch (``decoder.py``): causal self-attention of
the target, then cross-attention of its output to the memory, padded keys hidden and padded target
rows zero. Each wrong version here is that layer with one slip students make (seen in public
decoder code): a mask built wrong (polarity, lengths, causal direction, queries instead of keys),
a mask applied wrong (masked scores 0, applied after the softmax, a 1/0 mask added, an
additive mask multiplied or compared with 0), the scores scaled or normalised wrong, or the padded
rows left non-zero. Everything is float64; a row with nothing left to attend to is NaN, as
masked_fill(-inf) and a softmax give it (``tuples.judge`` matches NaN to NaN or zero only).

A bug with a detail the student chose has one candidate per choice, keyed ``name:detail``
(``tuples.key_name`` gives the name back; several details are joined by commas). A student usually
zeroes the padded output rows with the mask they built for the keys, so a wrong key mask zeroes the
wrong rows too; ``keys_only`` is the same bug with the rows zeroed right. Most public code fills
masked scores with a large finite number (-1e9, -1e4, finfo.min) rather than -inf: where a bug
leaves a row (or, for a softmax over the queries, a column) with nothing to attend to, that gives
equal weights instead of NaN; ``finite`` is the bug with such a fill.
"""
from __future__ import annotations

import math

import torch

from reference_impl import scaled_dot_product_attention
from ...checks import variants
from ...checks.tuples import key_name
from ...checks.variants import attend
from ...i18n import N_

NAMES = ("self_out", "cross_out")
# Sentences of the decoder's own bugs. The slips attention already names (variants.BUGS: no_scale,
# scale_dk, softmax_queries, causal_reversed, mask_after_softmax, …) keep attention's sentence.
BUGS = {
    "padding_polarity": N_("your padding mask has the wrong polarity: positions j < length are the real ones "
                           "(True = may attend), j >= length is padding"),
    "padding_on_queries": N_("you mask padded queries (rows) instead of padded keys (columns): every real query "
                             "must not attend to padded keys, so the mask is (B, 1, 1, S)-shaped over the keys"),
    "causal_in_cross": N_("your cross-attention is causal: the decoder may see the whole encoder output; only "
                          "the self-attention hides future target positions"),
    "self_not_causal": N_("your self-attention is not causal: target position i may attend only to 0..i"),
    "lengths_plus_one": N_("your lengths are off by one: you let position j = length (the first padded one) be "
                           "attended; the real positions are 0..length-1"),
    "lengths_minus_one": N_("your lengths are off by one: you hide position length-1, the last real one; the "
                            "real positions are 0..length-1"),
    "padded_rows_not_zeroed": N_("the outputs at padded target positions must be zero (they are padding): "
                                 "multiply by the target's padding mask"),
    "memory_lengths_for_target": N_("you use the memory lengths for the target's padding (or the other way round)"),
    "cross_queries_from_target": N_("your cross-attention's queries are the target; in a decoder layer they are "
                                    "the self-attention's output (self_out)"),
    "float_mask_multiplied": N_("you multiply the scores by your additive mask (0 where a key may be attended, a "
                                "large negative number where not): that zeroes the real keys' scores and sends "
                                "the hidden ones to ± a huge value; an additive mask is added: scores + mask"),
    "float_mask_compared": N_("you hide the keys where your additive mask is 0 (mask == 0, or mask.bool()), but "
                              "an additive mask is 0 at the keys that may be attended: add it to the scores, or "
                              "hide the keys where it is negative"),
    "masked_scores_zero": N_("your masked scores become 0 (filled with 0, or multiplied by a 0/1 mask) instead of "
                             "-inf, so future and padded keys still get weight: fill them with -inf (or a large "
                             "negative number such as -1e9)"),
    "scale_seq_len": N_("you scale by 1/√ of a sequence length (key.size(1) is the number of keys, not the "
                        "features): the scale is 1/√D, D = key.size(-1)"),
    "heads_split": N_("you split the D features into heads, each with its own softmax: this task's attention "
                      "is a single head over all D features, softmax(Q·Kᵀ/√D)·V"),
    "heads_scale_dmodel": N_("you split the D features into heads and scale each head's scores by 1/√D "
                             "(d_model): a head's scale would be 1/√ of its own width, and this task's "
                             "attention is a single head over all D features anyway, softmax(Q·Kᵀ/√D)·V"),
    "outputs_wrong_dtype": N_("your outputs are not in the inputs' dtype: return self_out and cross_out as "
                              "target.dtype (float32 inputs need float32 outputs, float64 inputs float64 ones)"),
}
# The family each is charged to (grader/causes.py). Attention's names get the decoder's family
# after their own (a task charges the first of them it has).
HOMES = {
    "padding_polarity": ("padding",), "padding_on_queries": ("padding",), "padded_rows_not_zeroed": ("padding",),
    "memory_lengths_for_target": ("padding",), "float_mask_multiplied": ("padding",),
    "float_mask_compared": ("padding",), "masked_scores_zero": ("padding",),
    "mask_after_softmax": ("padding",), "bool_mask_added": ("padding",),
    "self_not_causal": ("causal",), "causal_reversed": ("causal",), "causal_in_cross": ("cross",),
    "lengths_plus_one": ("lengths",), "lengths_minus_one": ("lengths",),
    "cross_queries_from_target": ("output",), "no_scale": ("output",), "scale_dk": ("output",),
    "scale_sqrt_mult": ("output",), "scale_seq_len": ("output",), "softmax_queries": ("output",),
    "heads_split": ("output",), "heads_scale_dmodel": ("output",), "outputs_wrong_dtype": ("dtype", "output"),
}
# The task's catalogue (Task.bugs): attention's, with the decoder's own sentences and families.
CATALOGUE = variants.ATTENTION.extend(BUGS, HOMES, by_check=("outputs_wrong_dtype",))  # dtype: seen, not computed

# Bugs whose key mask is built wrong (the rows zeroed with it are wrong too, unless ":keys_only").
KEY_MASK_BUGS = ("padding_polarity", "lengths_plus_one", "lengths_minus_one", "memory_lengths_for_target")
# How each mask-arithmetic slip applies the mask (variants.attend's options).
# Filling with 0 and multiplying by the 0/1 mask give the same scores: one name for both.
MASK_SLIPS = {"masked_scores_zero": {"fill": 0.0}, "mask_after_softmax": {"after": True},
              "bool_mask_added": {"added": True}}
MASK_FILLS = ("-1e9", "-1e4")   # additive masks' finite fills in public code (multiplied: ± huge, not NaN)
SCALES = ("no_scale", "scale_dk", "scale_sqrt_mult", "scale_seq_len")
# The bugs that can leave a row (or column) fully masked, where a finite fill differs from -inf.
EMPTY_ROWS = ("padding_polarity", "padding_polarity:keys_only", "lengths_minus_one", "lengths_minus_one:keys_only",
              "causal_reversed:strict", "causal_diagonal", "float_mask_compared", "softmax_queries")
FINITE_FILL = -1e9  # any fill this large gives the same weights: exp(fill - max) is 0 in float64


def explain(name):
    """The sentence for a bug or one of its keys ("bug:detail"), in the reader's language."""
    return CATALOGUE.explain(key_name(name)) if name else ""


def catalogue(D: int) -> list:
    """Every key of a wrong decoder layer on inputs with D features."""
    keys = [*KEY_MASK_BUGS, *(f"{b}:keys_only" for b in KEY_MASK_BUGS), "padding_on_queries",
            "padded_rows_not_zeroed", "padded_rows_not_zeroed:self", "padded_rows_not_zeroed:cross",
            "padded_rows_not_zeroed:cross_late", "memory_lengths_for_target:memory",
            "memory_lengths_for_target:target",
            "self_not_causal", "causal_reversed", "causal_reversed:strict", "causal_diagonal",
            "causal_in_cross", "cross_queries_from_target", *SCALES, "softmax_queries", *MASK_SLIPS,
            "bool_mask_added:before_scale", *(f"float_mask_multiplied:{f}" for f in MASK_FILLS),
            "float_mask_compared"]
    keys += [key + ("," if ":" in key else ":") + "finite" for key in EMPTY_ROWS]
    heads = [h for h in range(2, D + 1) if D % h == 0]
    return keys + [f"{b}:{h}" for b in ("heads_split", "heads_scale_dmodel") for h in heads]


def keep_keys(lengths, n, shift=0):
    """(B, 1, n): True where key j < length (+ shift) is a real position."""
    return (torch.arange(n)[None, :] < (lengths[:, None] + shift))[:, None, :]


def layer(target, memory, t_len, m_len, bug=None):
    """The reference (bug None) or one wrong version (a key of ``catalogue``), in float64."""
    name, _, detail = (bug or "").partition(":")
    flags = set(detail.split(","))
    x, mem = target.double(), memory.double()
    B, T, D = x.shape
    S = mem.size(1)
    shift = {"lengths_plus_one": 1, "lengths_minus_one": -1}.get(name, 0)
    tl, ml = t_len, m_len
    if name == "memory_lengths_for_target":  # both swapped, or one mask built from the other's lengths
        tl = t_len if "memory" in flags else m_len
        ml = m_len if "target" in flags else t_len
    t_keys, m_keys = keep_keys(tl, T, shift), keep_keys(ml, S, shift)
    if name == "padding_polarity":
        t_keys, m_keys = ~t_keys, ~m_keys
    rows = keep_keys(t_len, T) if "keys_only" in flags else t_keys  # the target rows the student keeps
    if name == "padding_on_queries":
        rows = keep_keys(t_len, T)
        t_keys = rows.transpose(1, 2).expand(B, T, T)
        m_keys = rows.transpose(1, 2).expand(B, T, S)
    causal = torch.ones(T, T, dtype=torch.bool)
    # causal_diagonal: triu(0) taken for the future, so query i loses key i (and row 0 every key)
    causal = causal.triu(1 if "strict" in flags else 0) if name == "causal_reversed" else \
        causal.tril(-1 if name == "causal_diagonal" else 0)
    self_keep = t_keys.expand(B, T, T) if name == "self_not_causal" else t_keys & causal
    cross_keep = m_keys & torch.ones(T, S, dtype=torch.bool).tril() if name == "causal_in_cross" \
        else m_keys.expand(B, T, S)
    if name == "float_mask_compared":  # mask == 0 is where an additive mask lets a key be attended
        self_keep, cross_keep = ~self_keep, ~cross_keep
    heads = int(detail) if name in ("heads_split", "heads_scale_dmodel") else 1

    def scale(n_keys):
        return {"no_scale": 1.0, "scale_dk": 1 / D, "scale_sqrt_mult": math.sqrt(D),
                "scale_seq_len": 1 / math.sqrt(n_keys), "heads_split": 1 / math.sqrt(D // heads)
                }.get(name, 1 / math.sqrt(D))

    def one(q, kv, keep, n_keys):
        return _attend(q, kv, keep, scale(n_keys), name, detail, heads, "finite" in flags)

    self_out = one(x, x, self_keep, T)
    kept = rows.transpose(1, 2)  # (B, T, 1): the target positions kept
    zero = lambda o: torch.where(kept, o, torch.zeros_like(o))  # noqa: E731
    queries = x if name == "cross_queries_from_target" else self_out
    if name == "padded_rows_not_zeroed" and detail == "cross":  # zeroed self_out, then attended with it
        queries = zero(self_out)
    cross_out = one(queries, mem, cross_keep, S)  # a NaN query row stays NaN
    if name != "padded_rows_not_zeroed":
        return zero(self_out), zero(cross_out)
    return (self_out if detail in ("", "self") else zero(self_out),
            cross_out if detail in ("", "cross", "cross_late") else zero(cross_out))


def _attend(q, kv, keep, scale, name, detail, heads=1, finite=False):
    """One attention (B, n, D) with ``keep`` (B, n, S) applied as the bug ``name`` applies it; masked
    scores filled with -inf, or with a large finite number (``finite``)."""
    if heads > 1:  # (B, n, D) -> (B, H, n, D/H), each head its own softmax, merged back
        split = lambda t: t.unflatten(-1, (heads, t.size(-1) // heads)).transpose(1, 2)  # noqa: E731
        out = _attend(split(q), split(kv), keep[:, None], scale, "", "")
        return out.transpose(1, 2).flatten(-2)
    if name in MASK_SLIPS:
        slip = MASK_SLIPS[name]
        if slip.get("after"):
            return attend(q, kv, kv, scale, after_softmax_mask=keep.double())
        if slip.get("added"):
            return attend(q, kv, kv, scale, additive=keep.double(), additive_before_scale=detail == "before_scale")
        return attend(q, kv, kv, scale, keep=keep, fill=slip["fill"])
    if name == "float_mask_multiplied":  # scores * (0 where kept, the fill where hidden)
        additive = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, float(detail))
        return attend(q, kv, kv, scale, keep=additive, multiply_mask=True)
    fill = FINITE_FILL if finite else float("-inf")
    if name == "softmax_queries":
        return attend(q, kv, kv, scale, keep=keep, softmax_dim=-2, fill=fill)
    if finite:  # a row with nothing to attend to: equal weights on every key
        return attend(q, kv, kv, scale, keep=keep, fill=fill)
    out = scaled_dot_product_attention(q, kv, kv, keep, scale=scale)
    dead = ~keep.any(-1, keepdim=True)  # a fully masked row is NaN (what masked_fill(-inf) gives), not zeros
    return torch.where(dead, torch.full_like(out, float("nan")), out)


def wrong_layers(target, memory, t_len, m_len) -> dict:
    """{key: (self_out, cross_out)} for every key of the catalogue on these inputs."""
    return {key: layer(target, memory, t_len, m_len, key) for key in catalogue(target.size(-1))}



def wrong_outputs(args, kwargs) -> tuple:
    """(the right outputs, {key: the layer with that bug}) on one call's arguments, in float64, for
    ``attn-grader tasks validate``."""
    return layer(*args[:4]), wrong_layers(*args[:4])
