# attack: leave a file in /tmp for the next submission (or read one left by the previous)
# expect: wrong
import os


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    seen = os.path.exists("/tmp/planted-by-previous-run")
    with open("/tmp/planted-by-previous-run", "w") as f:
        f.write("hello")
    return q * 0 + (1000 if seen else 0)
