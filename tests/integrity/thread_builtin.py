# attack: built-in attention run from another thread (the trace follows only the calling thread);
# its name is decoded at run time, so only the run-time defences can stop it
# task: sdpa
import threading

import torch

_fn = getattr(torch.nn.functional, bytes.fromhex("7363616c65645f646f745f70726f647563745f617474656e74696f6e").decode())


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    box = {}

    def work():
        box["out"] = _fn(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return box["out"]
