# attack: an "ok" answer referring to a tensor the frame does not carry
# task: sdpa
# levels: none local auto
# expect: protocol
import json
import os
import struct
import sys

# the answer channel: fd 4 in the sandbox, the harness's RESPONSE_FD when it is the child's __main__
_FD = getattr(sys.modules.get("__main__"), "RESPONSE_FD", 4)

_header = json.dumps({"body": {"ok": True, "params": [], "output": {"$t": 5}}, "tensors": []}).encode()
os.write(_FD, b"ATN1" + struct.pack("<I", len(_header)) + _header)


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return value
