"""Plain functions the views, the API and the CLI call; each takes a SQLAlchemy session.

- ``submissions``: ``submit``, visibility-aware ``submission_view``, listing.
- ``grading``: ``record_result`` (store a grader report), ``load_grade_function``.
- ``scores``: ``scores_table``, ``scores_csv``.
- ``courses``: the default course and its assignments.
- ``users``: ``add_user``, ``find_user``.
- ``quizzes``: attempts, answers graded by the question bank, manual grades.
- ``regrade``: ``queue_regrades`` (the one regrade path: jobs back on the queue), ``plan_regrades``.
- ``demo``: ``seed_demo`` for ``make run``.
"""
