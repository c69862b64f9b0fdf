# attack: overflow the C stack (deep recursion inside C code after lifting the recursion limit)
# expect: crash exception timeout
import sys


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    sys.setrecursionlimit(1 << 30)
    nested = []
    for _ in range(400_000):
        nested = [nested]
    return repr(nested)
