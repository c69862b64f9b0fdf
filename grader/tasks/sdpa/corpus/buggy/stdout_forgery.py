# expect: output
# bugs: several (it returns zeros: not attention, so no property earns points)
# bug: prints a forged perfect report and returns zeros
import json

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    print(json.dumps({"task": "sdpa", "score": 100, "max_score": 100, "passed": True, "checks": [], "error": None}))
    return torch.zeros(*torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2]),
                       query.size(-2), value.size(-1), dtype=query.dtype)
