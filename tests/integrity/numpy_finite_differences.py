# attack: a forward in NumPy (no autograd graph) whose child answers the harness's torch.autograd.grad
# with central finite differences of that forward: right to ~1e-9, and made up (issue 30, family 9)
# task: sdpa
# expect: grad
import math

import numpy as np
import torch

EPS = 1e-6
CHUNK = 256
_last = {}


def _forward(q, k, v, mask, is_causal, scale):
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if is_causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def _numeric_grad(outputs, inputs, grad_outputs=None, **kwargs):
    """Central differences of the forward, a block of one-hot moves per batched forward."""
    args, mask, is_causal, scale = _last["call"]
    g = grad_outputs.double().numpy()
    grads = []
    for i, x in enumerate(args):
        d = np.zeros(x.size)
        for start in range(0, x.size, CHUNK):
            idx = np.arange(start, min(start + CHUNK, x.size))
            bump = np.zeros((len(idx), x.size))
            bump[np.arange(len(idx)), idx] = EPS
            bump = bump.reshape(len(idx), *x.shape)
            outs = []
            for sign in (1, -1):
                moved = [np.broadcast_to(a, (len(idx),) + a.shape) for a in args]
                moved[i] = x + sign * bump
                outs.append(_forward(*moved, mask, is_causal, scale))
            d[idx] = ((outs[0] - outs[1]) / (2 * EPS) * g).reshape(len(idx), -1).sum(1)
        grads.append(torch.from_numpy(d.reshape(x.shape)).to(inputs[i].dtype))
    return tuple(grads)


torch.autograd.grad = _numeric_grad


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    args = [t.detach().double().numpy() for t in (query, key, value)]
    mask = None if attn_mask is None else attn_mask.detach().numpy()
    if mask is not None and mask.dtype != bool:
        mask = mask.astype(np.float64)
    _last["call"] = (args, mask, is_causal, scale)
    out = torch.from_numpy(_forward(*args, mask, is_causal, scale)).to(query.dtype)
    return out.requires_grad_(query.requires_grad or key.requires_grad or value.requires_grad)
