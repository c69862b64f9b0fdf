# attack: a daemon that double-forks and setsid()s to outlive the run
# expect: wrong
import os
import time


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for fd in range(0, 5):
                try:
                    os.close(fd)
                except OSError:
                    pass
            while True:
                time.sleep(0.1)
        os._exit(0)
    return q * 0
