"""Grading of student attention implementations: tasks, checks, sandbox and CLI.

Pure Python and torch: nothing here knows about the web app or its database.
"""
import hashlib
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
# What decides a score: the checks, the tasks (their points), the scoring, what the child runs, and
# the reference. Any change to these files changes GRADER_VERSION, which stored grades record, so a
# regrade can say whether the grader changed.
_VERSIONED = ("checks", "tasks", "grading.py", "causes.py", "jsonsafe.py", "sandbox/harness.py",
              # the bounds and the parse every static verdict rests on
              "bounded.py", "source.py",
              "sandbox/disarm.py", "sandbox/trap.py", "sandbox/seal.py", "sandbox/streams.py", "sandbox/answers.py",
              "../reference_impl",
              # what of torch the child can read (the sealed package directories)
              "sandbox/isolate.py", "sandbox/policy.py",
              # where a memory verdict is measured: the fresh child, and what the zygote gives it
              "sandbox/session.py", "sandbox/zygote.py")


def _proof(folder: str) -> bool:
    """A task's corpus and shortcuts prove the task (``attn-grader tasks validate``): they grade nothing."""
    parts = folder.split(os.sep)
    return "corpus" in parts or "shortcuts" in parts


def _digest() -> str:
    h = hashlib.sha256()
    for entry in _VERSIONED:
        path = os.path.normpath(os.path.join(_HERE, entry))
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(root, f) for root, _, names in os.walk(path) for f in names
            if f.endswith((".py", ".md", ".tmpl")) and not _proof(root))
        for f in files:
            h.update(os.path.relpath(f, os.path.dirname(_HERE)).encode())
            with open(f, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()[:10]


GRADER_VERSION = "2.0+" + _digest()
# The torch the service is installed with (the Makefile's TORCH_SPEC; tests/test_dependency_lock.py
# holds the two equal). The students' pre-check says so when its own torch is another release.
TORCH_VERSION = "2.13.0"
