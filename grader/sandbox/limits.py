"""Resource limits for one submission's run (defaults from the sandbox design study).

Each default can be overridden with an ``ATTN_GRADER_SANDBOX_<NAME>`` environment
variable (e.g. ``ATTN_GRADER_SANDBOX_MEMORY_BYTES=1073741824``), read when a
``Limits`` is created, so a service can tune them without code changes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

GiB, MiB = 1 << 30, 1 << 20


def _env(name: str, default: float, kind=float):
    def read():
        value = os.environ.get("ATTN_GRADER_SANDBOX_" + name)
        if not value:
            return kind(default)
        try:
            return kind(float(value))
        except ValueError:
            raise ValueError(f"ATTN_GRADER_SANDBOX_{name}={value!r} is not a number") from None
    return field(default_factory=read)


@dataclass
class Limits:
    memory_bytes: int = _env("MEMORY_BYTES", 2 * GiB, int)   # cgroup memory (all processes) + RLIMIT_DATA
    cpu_seconds: int = _env("CPU_SECONDS", 20, int)          # RLIMIT_CPU per process, soft = hard (SIGKILL)
    wall_seconds: float = _env("WALL_SECONDS", 60)           # the whole session
    call_seconds: float = _env("CALL_SECONDS", 10)           # one request; a hung call costs this much
    load_seconds: float = _env("LOAD_SECONDS", 20)           # import of the student file (cold child: torch too)
    processes: int = _env("PROCESSES", 64, int)              # cgroup pids.max and RLIMIT_NPROC
    file_size: int = _env("FILE_SIZE", 16 * MiB, int)        # RLIMIT_FSIZE
    tmp_size: int = _env("TMP_SIZE", 64 * MiB, int)          # the child's private /tmp (tmpfs)
    open_files: int = _env("OPEN_FILES", 256, int)           # RLIMIT_NOFILE
    output_bytes: int = _env("OUTPUT_BYTES", 1 * MiB, int)   # stdout and stderr kept, each
