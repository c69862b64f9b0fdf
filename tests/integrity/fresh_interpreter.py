# attack: the built-in computed in a freshly started interpreter, where nothing is switched off
# task: sdpa
import subprocess
import sys
import tempfile

import torch

_CODE = ("import sys, torch\n"
         "q, k, v = torch.load(sys.argv[1])\n"
         "torch.save(getattr(torch.nn.functional, 'scaled_dot_' + 'product_attention')(q, k, v), sys.argv[1])\n")


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    with tempfile.NamedTemporaryFile(suffix=".pt") as f:
        torch.save((query, key, value), f.name)
        subprocess.run([sys.executable, "-c", _CODE, f.name], check=True, timeout=20)
        return torch.load(f.name)
