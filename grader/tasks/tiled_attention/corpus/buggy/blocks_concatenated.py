# expect: memory
# bugs: several (whole rows of keys at once: online.key_streaming; the whole matrix: memory)
"""Scores computed block by block, then concatenated: the full matrix is built after all."""
import math

import torch


def tiled_attention(query, key, value, block_size):
    scale = 1 / math.sqrt(query.size(-1))
    blocks = [query @ key[..., s:s + block_size, :].transpose(-2, -1) * scale
              for s in range(0, key.size(-2), block_size)]
    weights = torch.softmax(torch.cat(blocks, dim=-1), dim=-1)
    return weights @ value
