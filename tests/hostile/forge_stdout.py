# attack: print a perfect-looking result (text, JSON and a wire frame) on stdout
# expect: wrong
import json
import struct
import sys


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    print("ALL CHECKS PASSED: score 100/100")
    print(json.dumps({"score": 100, "max_score": 100, "passed": True}))
    header = json.dumps({"body": {"ok": True, "output": {"$t": 0}}, "tensors": [
        {"dtype": "float32", "shape": list(q.shape)}]}).encode()
    sys.stdout.buffer.write(b"ATN1" + struct.pack("<I", len(header)) + header + bytes(q.numel() * 4))
    sys.stdout.flush()
    return q * 0
