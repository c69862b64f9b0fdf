# expect: online
"""Query slices with whole rows of keys: a plain softmax per slice, no streaming over the keys.

Source: ``split_cross_attention_forward`` of AUTOMATIC1111/stable-diffusion-webui
(modules/sd_hijack_optimizations.py; AGPL-3.0 licence; the "Doggettx" optimisation), which cuts
the queries into slices sized from the free memory and computes
``einsum('b i d, b j d -> b i j', q[:, i:end], k).softmax(-1)`` against every key. Adapted, not
copied: the task's signature; the slice is a fixed 64 query rows (the original derives its
number of steps from torch.cuda.mem_get_info); no projections, heads or hypernetworks.
Bug: no online softmax at all. Each slice holds 64 × S scores, so the memory is linear in S per
query row: with few queries and many keys (one query's row over all keys is 4 MiB in the
grader's case) it holds whole rows, where streaming over the keys holds L × block_size. The
values are right, and the long square case (slices of 64 × 8192, 2 MiB) fits its memory.
"""
import torch

SLICE = 64


def tiled_attention(query, key, value, block_size):
    scale = query.shape[-1] ** -0.5
    r1 = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    for i in range(0, query.shape[-2], SLICE):
        end = i + SLICE
        s1 = torch.einsum("...id,...jd->...ij", query[..., i:end, :], key) * scale
        s2 = s1.softmax(dim=-1)
        del s1
        r1[..., i:end, :] = torch.einsum("...ij,...jd->...id", s2, value)
        del s2
    return r1
