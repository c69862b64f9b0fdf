"""Shared fixtures. Keep this file small: each area keeps its own fixtures next to its tests."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# The service's fixtures (databases on SQLite and PostgreSQL, Redis, a fake grader).
pytest_plugins = ["service_support"]
