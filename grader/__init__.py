"""Grading of student attention implementations: tasks, checks, sandbox and CLI.

Pure Python and torch: nothing here knows about the web app or its database.
"""
