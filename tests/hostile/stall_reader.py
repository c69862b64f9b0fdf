# attack: stop reading requests (a signal handler parks the harness before it reads the next
# one), so a large request fills the pipe and a grader that writes blindly would hang forever
# expect: wrong timeout
import signal
import time


def _park(signum, frame):
    time.sleep(1e6)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    signal.signal(signal.SIGALRM, _park)
    signal.setitimer(signal.ITIMER_REAL, 0.01)
    return q * 0
