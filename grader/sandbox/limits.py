"""Resource limits for one submission's run (defaults from the sandbox design study)."""
from __future__ import annotations

import os
from dataclasses import dataclass

GiB, MiB = 1 << 30, 1 << 20


def _env(name: str, default: float) -> float:
    value = os.environ.get("ATTN_GRADER_SANDBOX_" + name)
    return float(value) if value else default


@dataclass
class Limits:
    memory_bytes: int = int(_env("MEMORY_BYTES", 2 * GiB))
    cpu_seconds: int = int(_env("CPU_SECONDS", 20))
    wall_seconds: float = _env("WALL_SECONDS", 60)
    call_seconds: float = _env("CALL_SECONDS", 10)    # one request; a hung call costs this much
    load_seconds: float = _env("LOAD_SECONDS", 20)    # import of the student file (cold child: torch too)
    processes: int = int(_env("PROCESSES", 64))
    file_size: int = int(_env("FILE_SIZE", 16 * MiB))
    tmp_size: int = int(_env("TMP_SIZE", 64 * MiB))
    open_files: int = int(_env("OPEN_FILES", 256))
    output_bytes: int = int(_env("OUTPUT_BYTES", 1 * MiB))
