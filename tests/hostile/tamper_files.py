# attack: tamper with the project's files and torch's installed files
# expect: exception
import os

import torch

TARGETS = [torch.__file__, os.path.join(os.path.dirname(torch.__file__), "functional.py"),
           "{{REPO}}/reference_impl/__init__.py", "{{REPO}}/grader/sandbox/harness.py", "{{TORCH_FILE}}"]


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    report = []
    for path in TARGETS:
        for action in ("append", "chmod", "unlink"):
            try:
                if action == "append":
                    with open(path, "a") as f:
                        f.write("\nraise SystemExit('pwned')\n")
                elif action == "chmod":
                    os.chmod(path, 0o777)
                else:
                    os.unlink(path)
                report.append(f"TAMPERED {action} {path}")
            except OSError as exc:
                report.append(f"{action} {path}: {type(exc).__name__}")
    raise PermissionError("; ".join(report))
