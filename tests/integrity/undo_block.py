# attack: hunts the objects that switch the built-in off and tries to undo them, then re-registers
# the kernel through torch.library; every name is decoded at run time
# task: sdpa
import importlib

import torch

_d = lambda h: bytes.fromhex(h).decode()
_gc = importlib.import_module(_d("6763"))
for _o in getattr(_gc, _d("6765745f6f626a65637473"))():
    if type(_o).__name__ in ("_DispatchModule", "Library"):
        for _attr in ("reset", _d("5f64657374726f79")):
            try:
                getattr(_o, _attr)()
            except Exception:
                pass
try:
    _lib = torch.library.Library("aten", "IMPL")
    _kernel = getattr(torch.ops.aten, _d("5f7363616c65645f646f745f70726f647563745f666c6173685f617474656e74696f6e5f666f725f637075"))
    _lib.impl(_d("7363616c65645f646f745f70726f647563745f617474656e74696f6e"), lambda q, k, v, *a, **kw: _kernel(q, k, v)[0], "CompositeImplicitAutograd")
except Exception:
    pass
_f = getattr(torch.nn.functional, _d("7363616c65645f646f745f70726f647563745f617474656e74696f6e"))


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return _f(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
