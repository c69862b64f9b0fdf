# attack: hunt the expected output in memory with gc and inspect, and return it
# expect: wrong
import gc
import inspect

import torch


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    want = q.shape[:-1] + v.shape[-1:]
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj.shape == want and obj is not q and obj is not v:
            return obj.detach().clone()
    for frame in inspect.stack():
        for name, value in frame.frame.f_locals.items():
            if "expect" in name or "ref" in name or "answer" in name:
                if isinstance(value, torch.Tensor):
                    return value
    return torch.zeros(want)
