"""Shared fixtures. Keep this file small: each area keeps its own fixtures next to its tests."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# The CLI answers in the language of LANG/LC_ALL (grader/i18n.py); the suite reads its English
# whatever the developer's locale (tests/test_grader_i18n.py sets its own).
os.environ["ATTN_GRADER_LANG"] = "en"

# The service's fixtures (databases on SQLite and PostgreSQL, Redis, a fake grader).
pytest_plugins = ["service_support"]
