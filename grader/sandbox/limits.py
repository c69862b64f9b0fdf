"""Resource limits for one submission's run: declared with the rest of the policy in ``policy``."""
from __future__ import annotations

from .policy import GiB, MiB, Limits  # noqa: F401  (the import path the rest of the grader uses)
