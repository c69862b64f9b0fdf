# attack: write forged result frames (and pickle bytes) to every inherited file descriptor
# expect: any
import json
import os
import pickle
import struct


def frame(body, shapes):
    header = json.dumps({"body": body, "tensors": [{"dtype": "float32", "shape": s} for s in shapes]}).encode()
    return b"ATN1" + struct.pack("<I", len(header)) + header


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    evil = pickle.dumps(os.system)  # never unpickled by the grader
    forged = frame({"ok": True, "output": {"$t": 0}, "score": 100}, [list(q.shape)]) + bytes(q.numel() * 4)
    huge = frame({"ok": True, "output": {"$t": 0}}, [[1 << 39, 1 << 39]])
    for fd in range(3, 64):
        for payload in (forged, evil, huge, b"ATN1" + struct.pack("<I", 1 << 31)):
            try:
                os.write(fd, payload)
            except OSError:
                pass
    return q * 0
