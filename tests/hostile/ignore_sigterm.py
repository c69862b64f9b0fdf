# attack: ignore SIGTERM (and friends) and sleep forever
# expect: timeout
import signal
import time


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)
    time.sleep(1e6)
