# attack: the harness's recorder classes replaced from the submission, then the built-in
# task: sdpa
# levels: none local auto
import sys

import torch


class _Quiet:
    def __init__(self, names):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_harness = sys.modules.get("__main__")
if hasattr(_harness, "OpRecorder"):
    _harness.OpRecorder = _Quiet
    _harness.AtenRecorder = _Quiet

_f = getattr(torch.nn.functional, bytes.fromhex("7363616c65645f646f745f70726f647563745f617474656e74696f6e").decode())


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return _f(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
