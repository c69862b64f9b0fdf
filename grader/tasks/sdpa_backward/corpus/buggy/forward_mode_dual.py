# expect: forbidden
"""Attack: forward-mode AD with one-hot tangents, every name built at run time.

Not adapted from public code: the cheat issue 26 describes. One forward over a batch of dual tensors
(the inputs stacked once per element, each with a one-hot tangent) gives the whole Jacobian-vector
product; ⟨J, grad_out⟩ per element is the gradient. The names (torch.autograd.forward_ad,
dual_level, make_dual, unpack_dual) come from hex strings, so the source scan sees none of them:
the child's block stops it (forward-mode autograd raises, like reverse mode) and the run-time check
names the attempt.
"""
import importlib
import math

import torch

_fw = importlib.import_module(bytes.fromhex("746f7263682e6175746f677261642e666f72776172645f6164").decode())
_level = getattr(_fw, bytes.fromhex("6475616c5f6c6576656c").decode())
_make = getattr(_fw, bytes.fromhex("6d616b655f6475616c").decode())
_unpack = getattr(_fw, bytes.fromhex("756e7061636b5f6475616c").decode())


def _forward(q, k, v, attn_mask, is_causal, scale):
    s = q @ k.transpose(-2, -1) * scale
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    inputs = [query, key, value]
    grads = []
    for i, x in enumerate(inputs):
        n = x.numel()
        tangent = torch.eye(n, dtype=x.dtype).view(n, *x.shape)
        with _level():
            stacked = [t.expand(n, *t.shape) for t in inputs]
            stacked[i] = _make(x.expand(n, *x.shape), tangent)
            out = _forward(*stacked, attn_mask, is_causal, scale)
            jvp = _unpack(out).tangent
        grads.append((jvp * grad_out).flatten(1).sum(1).view(x.shape))
    return tuple(grads)
