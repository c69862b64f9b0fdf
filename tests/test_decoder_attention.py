"""The decoder_attention task's reference and its wrong versions."""
import torch

from grader.checks import decoder, decoder_bugs
from grader.checks.tuples import key_name
from grader.checks.variants import home_family
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
        assert home_family(key_name(key), TASKS["decoder_attention"].points), key
    named = {key_name(k) for k in keys} | {"outputs_wrong_dtype"}
    assert set(decoder_bugs.BUGS) <= named
