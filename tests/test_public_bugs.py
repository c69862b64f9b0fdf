"""Bugs seen in public code that the catalogues now name (issue 40, item 3), each written here the way
a student writes it and named by the parent's catalogue on its output; and the rule that a case
whose inputs make two catalogue bugs coincide names the one already seen (variants.identify)."""
import math

import torch

from grader.checks.tolerance import relative_error
from grader.checks.variants import identify, mha_variants
from grader.tasks.kv_cache_attention import bugs as kv_bugs
from grader.tasks.tiled_attention import bugs as tiled_bugs
from reference_impl import multi_head_attention


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _named(out, ref, variants):
    return identify(out.double(), variants, relative_error(out.double(), ref)).partition(":")[0] or None


def _mha_student(x_q, x_kv, ws, H, interleaved=False, scale_of=lambda dk: dk ** -0.5):
    B, L, D = x_q.shape
    dk = D // H

    def split(x):
        if interleaved:  # reshape(B, T, d_k, H): head h takes every H-th feature
            return x.reshape(B, x.size(1), dk, H).permute(0, 3, 1, 2)
        return x.reshape(B, x.size(1), H, dk).transpose(1, 2)

    q, k, v = split(x_q @ ws[0].T), split(x_kv @ ws[1].T), split(x_kv @ ws[2].T)
    heads = torch.softmax(q @ k.transpose(-2, -1) * scale_of(dk), -1) @ v
    merged = heads.permute(0, 2, 3, 1) if interleaved else heads.transpose(1, 2)
    return merged.reshape(B, L, D) @ ws[3].T


def test_an_interleaved_head_split_and_a_precedence_slip_in_the_scale_are_named():
    g = _g(1)
    x_q, x_kv = torch.randn(2, 5, 12, generator=g), torch.randn(2, 7, 12, generator=g)
    ws = [torch.randn(12, 12, generator=g) / 4 for _ in range(4)]
    ref = multi_head_attention(x_q.double(), x_kv.double(), *(w.double() for w in ws), 3)
    variants = mha_variants(x_q, x_kv, ws, 3)
    assert _named(_mha_student(x_q, x_kv, ws, 3, interleaved=True), ref, variants) == "heads_interleaved"
    slip = _mha_student(x_q, x_kv, ws, 3, scale_of=lambda dk: dk ** -1 / 2)  # (d_k ** -1) / 2
    assert _named(slip, ref, variants) == "scale_precedence"
    assert "heads_interleaved" not in mha_variants(x_q, x_kv, ws, 1)  # one head: the same layer


def test_a_decoding_step_that_keeps_its_input_caches_or_scales_by_the_values_width_is_named():
    g = _g(2)
    B, N, D, Dv, position = 3, 9, 6, 11, 4
    q, k, v = torch.randn(B, 1, D, generator=g), torch.randn(B, 1, D, generator=g), torch.randn(B, 1, Dv, generator=g)
    kc, vc = torch.randn(B, N, D, generator=g), torch.randn(B, N, Dv, generator=g)
    right = kv_bugs.step(q, k, v, kc, vc, position)
    flat = lambda outs: torch.cat([o.reshape(-1).double() for o in outs])  # noqa: E731
    variants = {key: flat(got) for key, got in kv_bugs.wrong_steps(q, k, v, kc, vc, position).items()}
    keys, vals = torch.cat([kc[:, :position], k], 1), torch.cat([vc[:, :position], v], 1)
    out = torch.softmax(q @ keys.transpose(1, 2) / math.sqrt(D), -1) @ vals
    assert _named(flat((out, kc, vc)), flat(right), variants) == "cache_not_written"
    by_dv = torch.softmax(q @ keys.transpose(1, 2) / math.sqrt(Dv), -1) @ vals
    assert _named(flat((by_dv, *right[1:])), flat(right), variants) == "scale_dv"


def test_an_inverted_correction_factor_in_the_online_softmax_is_named():
    g = _g(3)
    q, k, v = torch.randn(2, 6, 5, generator=g), torch.randn(2, 13, 5, generator=g), torch.randn(2, 13, 4, generator=g)
    m = torch.full((2, 6, 1), float("-inf"))
    l, acc = torch.zeros(2, 6, 1), torch.zeros(2, 6, 4)
    for j in range(0, 13, 4):  # exp(m_new - m_old) where exp(m_old - m_new) belongs; NaN-safe first block
        s = q @ k[:, j:j + 4].transpose(-2, -1) / math.sqrt(5)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        corr = torch.exp(m_new - m).nan_to_num(0.0, posinf=0.0)
        p = torch.exp(s - m_new)
        l, acc, m = l * corr + p.sum(-1, keepdim=True), acc * corr + p @ v[:, j:j + 4], m_new
    ref = tiled_bugs.online(q, k, v, 4)
    assert _named(acc / l, ref, tiled_bugs.candidates(q, k, v, 4)) == "correction_inverted"


def test_where_two_bugs_give_the_same_values_the_one_already_named_is_taken():
    ref = torch.tensor([1.0, 2.0, 3.0])
    out = torch.tensor([1.0, 2.0, 4.0])
    variants = {"a_bug": out.clone(), "b_bug:detail": out.clone()}
    err = relative_error(out, ref)
    assert identify(out, variants, err) == "a_bug"  # the first of equals, as before
    assert identify(out, variants, err, prefer=["b_bug"]) == "b_bug:detail"
    assert identify(out, variants, err, prefer=["c_bug"]) == "a_bug"


def test_a_running_maximum_overwritten_before_the_correction_is_named():
    g = _g(4)
    q, k, v = torch.randn(2, 6, 5, generator=g), torch.randn(2, 13, 5, generator=g), torch.randn(2, 13, 4, generator=g)
    m = torch.full((2, 6, 1), float("-inf"))
    l, acc = torch.zeros(2, 6, 1), torch.zeros(2, 6, 4)
    for j in range(0, 13, 4):
        s = q @ k[:, j:j + 4].transpose(-2, -1) / math.sqrt(5)
        m = torch.maximum(m, s.amax(-1, keepdim=True))   # overwritten first: the correction is exp(0)
        p = torch.exp(s - m)
        l, acc = l + p.sum(-1, keepdim=True), acc + p @ v[:, j:j + 4]
    ref = tiled_bugs.online(q, k, v, 4)
    assert _named(acc / l, ref, tiled_bugs.candidates(q, k, v, 4)) == "max_updated_first"
