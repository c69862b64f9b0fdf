"""Check families: each module holds the checks of one or two families (see grader.tasks for the lists)."""
