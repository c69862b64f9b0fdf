# attack: hang while being imported
# expect: timeout
import time

time.sleep(1e6)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return q
