"""Task ``tiled_attention``'s part of the fingerprint of torch's fused kernel (``grader/checks/fingerprint.py``)."""
from __future__ import annotations

import torch

from ...checks.fingerprint import Fingerprint, flash
from ..sdpa.fingerprint import sdpa_plain, sdpa_sample

# tiled_attention(query, key, value, block_size): the same kernel on the first three arguments.
FINGERPRINT = Fingerprint(sample=lambda ctx, dtype=torch.float32: (*sdpa_sample(ctx, dtype),
                                                                   ctx.inputs.randint(2, 6)),
                          builtin=lambda args, kwargs: [flash(*args[:3])],
                          plain=lambda args, kwargs: sdpa_plain(args[:3], {}))
