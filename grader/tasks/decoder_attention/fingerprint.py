"""Task ``decoder_attention``'s part of the fingerprint of torch's fused kernel (``grader/checks/fingerprint.py``)."""
from __future__ import annotations

import torch

from ...checks.fingerprint import Fingerprint, flash


def _keys(lengths, n):
    """(B, 1, 1, n): True where position j < length is a real one."""
    return (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :]


def _decoder_builtin(args, kwargs) -> list:
    """decoder_attention's two attentions, each through the kernel on (B, 1, T, D) inputs."""
    target, memory, t_len, m_len = args
    T_, S = target.size(1), memory.size(1)
    rows = _keys(t_len, T_)[:, 0, 0, :, None]  # (B, T, 1)
    zero = torch.zeros((), dtype=target.dtype)
    causal = torch.ones(T_, T_, dtype=torch.bool).tril()
    x, mem = target[:, None], memory[:, None]
    self_out = flash(x, x, x, attn_mask=_keys(t_len, T_) & causal)[:, 0]
    self_out = torch.where(rows, self_out, zero)
    cross = flash(self_out[:, None], mem, mem, attn_mask=_keys(m_len, S).expand(-1, 1, T_, S))[:, 0]
    return [(self_out, torch.where(rows, cross, zero))]


def _decoder_plain(args, kwargs) -> list:
    from .checks import reference
    target = args[0]
    return [reference(*args, dtype=target.dtype)]


def _decoder_sample(ctx, dtype=torch.float32):
    from .checks import lengths
    r = ctx.inputs.randn
    B = ctx.inputs.randint(3, 5)
    T_, S, D = ctx.inputs.distinct(3, 5, 16)
    return (r(B, T_, D, dtype=dtype), r(B, S, D, dtype=dtype), lengths(ctx, B, T_), lengths(ctx, B, S))


FINGERPRINT = Fingerprint(sample=_decoder_sample, builtin=_decoder_builtin, plain=_decoder_plain)
