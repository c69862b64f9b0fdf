# attack: flood stdout and stderr
# expect: wrong exception crash
import sys


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    line = "x" * 1023 + "\n"
    for _ in range(200_000):
        sys.stdout.write(line)
        sys.stderr.write(line)
    return q * 0
