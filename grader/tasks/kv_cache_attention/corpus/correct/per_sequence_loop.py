"""One sequence of the batch at a time, with a list of rows for the cache.

Written for this project: the loop a first decoder often has.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    outs, ks, vs = [], [], []
    for b in range(query.size(0)):
        kc = torch.cat([k_cache[b, :position], key[b], k_cache[b, position + 1:]])
        vc = torch.cat([v_cache[b, :position], value[b], v_cache[b, position + 1:]])
        scores = query[b] @ kc[:position + 1].T / math.sqrt(query.size(-1))     # (1, n)
        outs.append(torch.softmax(scores, -1) @ vc[:position + 1])
        ks.append(kc)
        vs.append(vc)
    return torch.stack(outs), torch.stack(ks), torch.stack(vs)
