"""Job dispatch: the database is the truth, a queue only delivers job ids.

- ``claim``: claim a job with a conditional update, renew its lease, write the result fenced
  by the attempt number.
- ``worker``: a grading worker process (polls the database, or consumes Dramatiq messages).
- ``reconciler``: re-notifies lost or stale jobs, fails jobs that lost their host too often.
- ``broker``: how the web app notifies workers (nothing to do when they poll; Dramatiq on Redis).
- ``supervisor``: starts and restarts worker processes for ``serve`` and ``worker``.
"""
