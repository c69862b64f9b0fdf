"""Grading of student attention implementations: tasks, checks, sandbox and CLI.

Pure Python and torch: nothing here knows about the web app or its database.
"""

# Bump when a check, its inputs or its points change: stored grades record it.
GRADER_VERSION = "1.0.0"
