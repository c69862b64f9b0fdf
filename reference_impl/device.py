"""Where the reference runs: CUDA when present, else the CPU."""
from __future__ import annotations

import torch

from grader import settings


def default_device() -> torch.device:
    """CUDA when a GPU is visible, the CPU otherwise; ``ATTN_GRADER_DEVICE`` overrides."""
    wanted = settings.value("DEVICE")
    if wanted:
        return torch.device(wanted)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(name: str | None) -> torch.device:
    """A device from a user's string, with a clear error when CUDA is asked for and absent."""
    if name is None or name == "auto":
        return default_device()
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA was requested but no CUDA device is available on this machine")
    return device
