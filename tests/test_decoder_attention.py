"""The decoder_attention task's reference and its wrong versions."""
import torch

from grader.checks import decoder

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


def test_every_bug_changes_the_outputs():
    target, memory = _batch(1)
    ref = torch.cat([o.reshape(-1) for o in decoder.reference(target, memory, *LENGTHS)])
    for bug in decoder.BUGS:
        got = torch.cat([o.reshape(-1) for o in decoder.layer(target, memory, *LENGTHS, bug)])
        assert not torch.allclose(torch.nan_to_num(got, nan=1e3), ref, atol=1e-6), bug
        assert decoder.explain(bug) and decoder.explain(bug + ":keys_only") == decoder.explain(bug)
