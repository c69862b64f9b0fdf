"""The decoder_attention task's reference and its wrong versions."""
import pytest
import torch

from grader.tasks.decoder_attention import bugs as decoder_bugs, checks as decoder
from grader.checks.tolerance import relative_error
from grader.checks.tuples import flat, key_name
from grader.checks.variants import identify
from grader.tasks import TASKS

LENGTHS = (torch.tensor([6, 3, 1]), torch.tensor([8, 5, 2]))


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 6, 5, dtype=torch.float64, generator=g),
            torch.randn(3, 8, 5, dtype=torch.float64, generator=g))


def test_the_reference_is_the_contract_written_out():
    target, memory = _batch()
    t_len, m_len = LENGTHS
    self_out, cross_out = decoder.reference(target, memory, t_len, m_len)
    for b in range(3):
        t, s = int(t_len[b]), int(m_len[b])
        x, m = target[b, :t], memory[b, :s]
        scores = (x @ x.T / 5 ** 0.5).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        h = torch.softmax(scores, -1) @ x
        c = torch.softmax(h @ m.T / 5 ** 0.5, -1) @ m
        assert torch.allclose(self_out[b, :t], h) and torch.allclose(cross_out[b, :t], c)
        assert not self_out[b, t:].any() and not cross_out[b, t:].any()
    same = decoder.reference(target.float(), memory.float(), t_len, m_len, torch.float32)
    assert all(torch.allclose(a.double(), r, atol=1e-5) for a, r in zip(same, (self_out, cross_out)))


def test_every_wrong_layer_changes_the_outputs_and_is_explained():
    target, memory = _batch(1)
    ref = torch.cat([o.reshape(-1) for o in decoder.reference(target, memory, *LENGTHS)])
    keys = decoder_bugs.catalogue(target.size(-1))
    for key in keys:
        got = torch.cat([o.reshape(-1) for o in decoder_bugs.layer(target, memory, *LENGTHS, key)])
        assert not torch.allclose(torch.nan_to_num(got, nan=1e3), ref, atol=1e-6), key
        assert decoder_bugs.explain(key), key
        assert TASKS["decoder_attention"].bugs.home_family(key_name(key), TASKS["decoder_attention"].points), key
    named = {key_name(k) for k in keys} | {"outputs_wrong_dtype"}
    assert set(decoder_bugs.BUGS) <= named


def _named(outs, target, memory, t_len, m_len):
    """The bug the parent names for these outputs (as tuples.judge does), or None."""
    ref = flat(decoder.reference(target.double(), memory.double(), t_len, m_len))
    got = torch.nan_to_num(flat(outs), nan=0.0)
    candidates = {key: torch.nan_to_num(flat(v), nan=0.0)
                  for key, v in decoder_bugs.wrong_layers(target, memory, t_len, m_len).items()}
    return key_name(identify(got, candidates, relative_error(got, ref)))


def _student(target, memory, t_len, m_len, heads=1, scale=None, apply="fill"):
    """A float32 decoder written the way public code writes it, with one knob turned."""
    B, T, D = target.shape
    S = memory.size(1)
    t_keys = torch.arange(T)[None, None, :] < t_len[:, None, None]
    m_keys = torch.arange(S)[None, None, :] < m_len[:, None, None]

    def attend(q, kv, keep):
        split = lambda x: x.reshape(B, x.size(1), heads, D // heads).transpose(1, 2)  # noqa: E731
        q_h, kv_h, keep = split(q), split(kv), keep[:, None]
        s = q_h @ kv_h.transpose(-2, -1) * (scale or (D // heads) ** -0.5)
        if apply == "after_softmax":
            w = torch.softmax(s, -1) * keep
        elif apply == "add_01":
            w = torch.softmax(s + keep.float(), -1)
        else:
            w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
        return (w @ kv_h).transpose(1, 2).reshape(B, -1, D)

    rows = t_keys.transpose(1, 2)
    x = attend(target, target, t_keys & torch.ones(T, T, dtype=torch.bool).tril()) * rows
    return x, attend(x, memory, m_keys.expand(B, T, S)) * rows


@pytest.mark.parametrize("knobs, bug", [
    ({"heads": 2, "scale": 8 ** -0.5}, "heads_scale_dmodel"),   # hyunwoongko/transformer's d_model = head * d_tensor
    ({"heads": 4}, "heads_split"),
    ({"scale": 1 / 8}, "scale_dk"),
    ({"apply": "after_softmax"}, "mask_after_softmax"),
    ({"apply": "add_01"}, "bool_mask_added"),
    ({}, None),
])
def test_bugs_without_a_corpus_file_are_named_on_float32_outputs(knobs, bug):
    g = torch.Generator().manual_seed(3)
    target, memory = torch.randn(3, 6, 8, generator=g), torch.randn(3, 7, 8, generator=g)
    t_len, m_len = torch.tensor([6, 3, 1]), torch.tensor([7, 5, 2])
    assert _named(_student(target, memory, t_len, m_len, **knobs), target, memory, t_len, m_len) == bug


def _one_sided(target, memory, t_len, m_len, mem_lengths_from=None, future_from_diagonal=False):
    """A float32 decoder as public code writes it (additive -inf masks), with one mask built wrong:
    the memory's padding from ``mem_lengths_from`` lengths, or the future taken as triu(0)."""
    T, S, D = target.size(1), memory.size(1), target.size(2)
    t_pad = torch.arange(T)[None, :] >= t_len[:, None]
    m_pad = torch.arange(S)[None, :] >= (m_len if mem_lengths_from is None else mem_lengths_from)[:, None]
    future = torch.ones(T, T, dtype=torch.bool).triu(0 if future_from_diagonal else 1)
    s = (target @ target.transpose(1, 2) / D ** 0.5).masked_fill(future | t_pad[:, None, :], float("-inf"))
    x = torch.softmax(s, -1) @ target
    c = (x @ memory.transpose(1, 2) / D ** 0.5).masked_fill(m_pad[:, None, :], float("-inf"))
    rows = ~t_pad[..., None]
    return x * rows, (torch.softmax(c, -1) @ memory) * rows


def test_one_mask_from_the_other_sequence_s_lengths_and_a_causal_mask_hiding_the_diagonal_are_named():
    """Seen in public code: only the memory's mask built from target_lengths (a copy-paste slip), and
    triu(ones) without diagonal=1 taken for the future (row 0 then has no key: NaN)."""
    g = torch.Generator().manual_seed(5)
    target, memory = torch.randn(3, 6, 8, generator=g), torch.randn(3, 7, 8, generator=g)
    t_len, m_len = torch.tensor([6, 3, 2]), torch.tensor([4, 7, 5])
    slip = _one_sided(target, memory, t_len, m_len, mem_lengths_from=t_len)
    assert _named(slip, target, memory, t_len, m_len) == "memory_lengths_for_target"
    diagonal = _one_sided(target, memory, t_len, m_len, future_from_diagonal=True)
    assert _named(diagonal, target, memory, t_len, m_len) == "causal_diagonal"
