# attack: decoder_attention through torch's fused CPU kernel called by torch.ops, its name decoded at run time,
# on (B, 1, T, D) views with boolean padding masks (the causal one combined in), padded rows zeroed by hand
# task: decoder_attention
# levels: none
# (one level: the block itself is the same for every task, and torch_ops_kernel tries it at every level)
import torch

_name = bytes.fromhex("5f7363616c65645f646f745f70726f647563745f666c6173685f617474656e74696f6e5f666f725f637075").decode()


def _attend(q, kv, keep):
    try:
        return getattr(torch.ops.aten, _name)(q, kv, kv, attn_mask=torch.zeros(keep.shape, dtype=q.dtype)
                                              .masked_fill(~keep, float("-inf")))[0]
    except Exception:  # blocked: plain attention, so that the grading goes on to the parent's verdict
        s = (q @ kv.transpose(-2, -1) / q.size(-1) ** 0.5).masked_fill(~keep, float("-inf"))
        return torch.softmax(s, -1) @ kv


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T, S = target.size(1), memory.size(1)
    t_keys = (torch.arange(T)[None, :] < target_lengths[:, None])[:, None, None, :]   # (B, 1, 1, T)
    m_keys = (torch.arange(S)[None, :] < memory_lengths[:, None])[:, None, None, :]
    rows = t_keys[:, 0, 0, :, None]                                                    # (B, T, 1)
    x, m = target[:, None], memory[:, None]
    self_out = _attend(x, x, t_keys & torch.ones(T, T, dtype=torch.bool).tril())[:, 0]
    self_out = torch.where(rows, self_out, torch.zeros((), dtype=target.dtype))
    cross = _attend(self_out[:, None], m, m_keys.expand(-1, 1, T, S))[:, 0]
    return self_out, torch.where(rows, cross, torch.zeros((), dtype=target.dtype))
