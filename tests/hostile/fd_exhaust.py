# attack: exhaust file descriptors, then return garbage
# expect: wrong exception
import os


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    fds = []
    try:
        while True:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    return q * 0 + len(fds)
