# expect: forbidden
# bug: searches the process's memory (gc) for a tensor of the output's shape to return
import gc

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    shape = (*batch, query.size(-2), value.size(-1))
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and tuple(obj.shape) == shape and obj is not query:
            return obj.detach().clone()
    return torch.zeros(shape, dtype=query.dtype)
