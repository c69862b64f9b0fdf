import math

import torch


class OnlineSoftmax:
    """Running state of one pass over the key blocks."""

    def __init__(self, rows_shape, value_dim, dtype):
        self.m = torch.full(rows_shape + (1,), float("-inf"), dtype=dtype)
        self.l = torch.zeros(rows_shape + (1,), dtype=dtype)
        self.acc = torch.zeros(rows_shape + (value_dim,), dtype=dtype)

    def update(self, scores, values):
        m_new = torch.maximum(self.m, scores.amax(-1, keepdim=True))
        rescale = (self.m - m_new).exp()
        p = (scores - m_new).exp()
        self.l = self.l * rescale + p.sum(-1, keepdim=True)
        self.acc = self.acc * rescale + torch.matmul(p, values)
        self.m = m_new

    def result(self):
        return self.acc / self.l


def tiled_attention(query, key, value, block_size):
    state = OnlineSoftmax(query.shape[:-1], value.shape[-1], query.dtype)
    scale = query.shape[-1] ** -0.5
    for start in range(0, key.shape[-2], block_size):
        block = slice(start, start + block_size)
        state.update(torch.matmul(query, key[..., block, :].transpose(-1, -2)) * scale, value[..., block, :])
    return state.result()
