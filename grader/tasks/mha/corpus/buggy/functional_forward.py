# expect: forbidden
# bug: calls F.multi_head_attention_forward through an alias built at run time
import importlib

import torch

_fn = getattr(importlib.import_module("torch.nn." + "functional"), "multi_head" + "_attention_forward")


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    D = x_q.size(-1)
    out, _ = _fn(x_q.transpose(0, 1), x_kv.transpose(0, 1), x_kv.transpose(0, 1), D, num_heads,
                 torch.cat([w_q, w_k, w_v]), None, None, None, False, 0.0, w_o, None,
                 need_weights=False, attn_mask=attn_mask)
    return out.transpose(0, 1)
