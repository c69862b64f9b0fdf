"""The access log kept in files the service can answer for: one JSON-lines file a day.

With ``ATTN_GRADER_ACCESS_LOG_DIR`` set, every ``web.access`` line (method, path, status,
user id, address) is also appended to ``<dir>/access-YYYY-MM-DD.jsonl`` (UTC days). Unlike
the log stream (journald, a log shipper), these files are in the service's keeping, so a
data request can export one person's lines, an erasure can anonymise them, and
``prune`` deletes the days older than ``ACCESS_LOG_RETENTION_DAYS``.

Every process of every web host may append: each line is one ``write`` on a file opened for
appending, under an exclusive ``flock``; a rewrite (erasure) holds the same lock and
replaces the file, and a writer that finds the file replaced while it waited opens it again.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import time
from datetime import date, timedelta
from pathlib import Path

FILE = re.compile(r"access-(\d{4}-\d{2}-\d{2})\.jsonl")


def day_file(directory: Path, day: date) -> Path:
    return Path(directory) / f"access-{day.isoformat()}.jsonl"


class DailyFileHandler(logging.Handler):
    """Appends each record, formatted as one line, to the day's file."""

    def __init__(self, directory: str | Path):
        super().__init__()
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record).replace("\n", " ") + "\n").encode()
            _append(day_file(self.directory, _utc_day(record.created)), line)
        except Exception:
            self.handleError(record)


def keep_access_files(access_log: logging.Logger, directory: str) -> None:
    """Also append ``access_log``'s lines to a file a day in ``directory``; once per process
    and folder, however many apps a process creates."""
    from .observability import ContextFilter, JsonFormatter

    for old in list(access_log.handlers):
        if isinstance(old, DailyFileHandler):
            if old.directory == Path(directory):
                return
            access_log.removeHandler(old)
    handler = DailyFileHandler(directory)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    access_log.addHandler(handler)
    if access_log.getEffectiveLevel() > logging.INFO:  # the files keep every request
        access_log.setLevel(logging.INFO)


def _utc_day(timestamp: float) -> date:
    return date(*time.gmtime(timestamp)[:3])


def _append(path: Path, line: bytes) -> None:
    for _ in range(3):  # a rewrite may replace the file while this one waits for the lock
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_ino != os.stat(path).st_ino:
                    continue
            except FileNotFoundError:
                continue
            os.write(fd, line)
            return
        finally:
            os.close(fd)


def files(directory: str | Path) -> list[tuple[date, Path]]:
    found = []
    for path in sorted(Path(directory).glob("access-*.jsonl")):
        match = FILE.fullmatch(path.name)
        if match:
            found.append((date.fromisoformat(match.group(1)), path))
    return found


def _entries(path: Path):
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            yield raw, json.loads(raw)
        except ValueError:
            yield raw, None


def lines_for_user(directory: str | Path, user_id: int) -> list[dict]:
    """Every kept access line of ``user_id``, oldest first."""
    return [entry for _day, path in files(directory) for _raw, entry in _entries(path)
            if isinstance(entry, dict) and entry.get("user_id") == user_id]


def anonymise_user(directory: str | Path, user_id: int) -> int:
    """Rewrite every file without ``user_id``'s identity (the user id and the address go;
    the request itself stays, so traffic figures still add up). Returns the lines changed."""
    changed = 0
    for _day, path in files(directory):
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            out, here = [], 0
            for raw, entry in _entries(path):
                if isinstance(entry, dict) and entry.get("user_id") == user_id:
                    entry.update(user_id=None, remote=None, anonymised=True)
                    raw, here = json.dumps(entry, ensure_ascii=False), here + 1
                out.append(raw + "\n")
            if here:
                tmp = path.with_suffix(".tmp")
                tmp.write_text("".join(out), encoding="utf-8")
                os.chmod(tmp, 0o600)
                os.replace(tmp, path)
                changed += here
        finally:
            os.close(fd)
    return changed


def prune(directory: str | Path, keep_days: int, today: date | None = None) -> list[Path]:
    """Delete the files of days older than ``keep_days`` before ``today``; returns them."""
    today = today or _utc_day(time.time())
    oldest = today - timedelta(days=keep_days)
    removed = []
    for day, path in files(directory):
        if day < oldest:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
