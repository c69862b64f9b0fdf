"""Shared fixtures. Keep this file small: each area keeps its own fixtures next to its tests."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# The CLI answers in the language of LANG/LC_ALL (grader/i18n.py); the suite reads its English
# whatever the developer's locale (tests/test_grader_i18n.py sets its own).
os.environ["ATTN_GRADER_LANG"] = "en"

# Grade in this process as the service's workers and `attn-grader check` do: on one torch thread
# (web/dispatch/threads.py says why). torch's default pool, a thread per core, in each of the
# suite's xdist workers made every in-process grading slower on two busy cores (measured: two
# processes grading 36 corpus files each, 19.5 s on torch's default pool, 15.6 s on one thread).
import torch  # noqa: E402

torch.set_num_threads(1)

# The service's fixtures (databases on SQLite and PostgreSQL, Redis, a fake grader).
pytest_plugins = ["service_support"]

# The modules that take minutes (pytest --durations), first: `make test` runs one module per
# worker (pytest-xdist, one worker more than cores, --dist loadfile), and the workers finish
# together when the long ones do not start last. Within a module the order is unchanged.
HEAVY_FIRST = ("test_grader_corpus.py", "test_browser.py", "test_accessibility.py", "test_integrity.py",
               "test_student_cli.py", "test_sandbox_hostile.py", "test_faults.py", "test_grader_cli.py",
               "test_service_e2e.py", "test_dispatch_processes.py", "test_notebooks.py", "test_trap.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
