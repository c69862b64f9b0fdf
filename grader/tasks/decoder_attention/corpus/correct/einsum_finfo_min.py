import torch


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, D = target.shape
    S = memory.shape[1]
    neg = torch.finfo(target.dtype).min
    pos_t = torch.arange(T, device=target.device)
    pos_s = torch.arange(S, device=target.device)
    key_pad_t = pos_t.unsqueeze(0) >= target_lengths.unsqueeze(1)          # True = padding
    key_pad_s = pos_s.unsqueeze(0) >= memory_lengths.unsqueeze(1)
    future = pos_t.unsqueeze(1) < pos_t.unsqueeze(0)                        # j > i
    hide_self = key_pad_t.unsqueeze(1) | future.unsqueeze(0)
    s = torch.einsum("btd,bsd->bts", target, target) * D ** -0.5
    self_out = torch.einsum("bts,bsd->btd", s.masked_fill(hide_self, neg).softmax(-1), target)
    c = torch.einsum("btd,bsd->bts", self_out, memory) * D ** -0.5
    cross_out = torch.einsum("bts,bsd->btd", c.masked_fill(key_pad_s.unsqueeze(1), neg).softmax(-1), memory)
    real = (~key_pad_t).unsqueeze(-1).to(target.dtype)
    return self_out * real, cross_out * real
