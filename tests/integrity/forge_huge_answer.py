# attack: an answer announcing 256 MiB of tensor data, for the parent to read and copy
# task: sdpa
# levels: none local auto
# expect: protocol
import json
import os
import struct
import sys
import threading

# the answer channel: fd 4 in the sandbox, the harness's RESPONSE_FD when it is the child's __main__
_FD = getattr(sys.modules.get("__main__"), "RESPONSE_FD", 4)

_header = json.dumps({"body": {"ok": True, "params": None, "output": {"$t": 0}},
                      "tensors": [{"dtype": "float64", "shape": [4096, 8192]}]}).encode()


def _flood():
    os.write(_FD, b"ATN1" + struct.pack("<I", len(_header)) + _header)
    chunk = b"\0" * (1 << 20)
    try:
        for _ in range(256):
            os.write(_FD, chunk)
    except OSError:
        pass


threading.Thread(target=_flood, daemon=True).start()


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return value
