# expect: output
# bugs: several (it returns the queries' mean: not attention, so no property earns points)
# bug: patches torch's comparison functions and returns the queries' mean, hoping the grader compares in here
import torch

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    return value.mean(dim=-2, keepdim=True).expand(*batch, query.size(-2), value.size(-1)).clone()
