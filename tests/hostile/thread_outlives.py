# attack: threads that outlive the call, keep spinning and scribble on shared state
# expect: wrong
import sys
import threading
import time


def _spin():
    while True:
        sys.stdout.write("still here\n")
        time.sleep(0.001)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    for _ in range(4):
        threading.Thread(target=_spin).start()  # non-daemon: would keep a plain interpreter alive
    return q * 0
