# attack: make every comparison in torch say "equal"
# expect: wrong
import torch

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *x, **k: torch.ones_like(a, dtype=torch.bool)
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__sub__ = lambda self, other: torch.zeros_like(self)
torch.Tensor.abs = lambda self: torch.zeros_like(self)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return torch.zeros(q.shape[:-1] + v.shape[-1:])
