import math

import torch


class DecoderAttention:
    def __init__(self, target_lengths, memory_lengths, T, S):
        self.target_real = torch.arange(T).expand(len(target_lengths), T) < target_lengths.unsqueeze(-1)
        self.memory_real = torch.arange(S).expand(len(memory_lengths), S) < memory_lengths.unsqueeze(-1)
        self.causal = torch.tril(torch.ones(T, T, dtype=torch.bool))

    @staticmethod
    def attend(q, k, v, allowed):
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(k.size(-1))
        scores = torch.where(allowed, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
        scores = scores - scores.max(dim=-1, keepdim=True).values
        w = scores.exp()
        return torch.matmul(w / w.sum(-1, keepdim=True), v)

    def __call__(self, target, memory):
        self_out = self.attend(target, target, target, self.causal.unsqueeze(0) & self.target_real.unsqueeze(1))
        cross_out = self.attend(self_out, memory, memory, self.memory_real.unsqueeze(1))
        zero = torch.zeros((), dtype=target.dtype)
        rows = self.target_real.unsqueeze(-1)
        return torch.where(rows, self_out, zero), torch.where(rows, cross_out, zero)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    layer = DecoderAttention(target_lengths, memory_lengths, target.size(1), memory.size(1))
    return layer(target, memory)
