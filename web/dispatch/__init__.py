"""Job dispatch: the database is the queue; a broker, if any, only rings the doorbell.

Every job is a ``grading_jobs`` row. Workers claim rows with a conditional update, hold them
under a renewed lease and store the result fenced by the attempt number; retries (the job's
``attempts``), time limits (the lease, MAX_GRADE_SECONDS) and lost-job recovery (the
reconciler) are all decided there, the same with or without a broker. A notification carries
only a job id and says "claim this one now"; losing one costs a delay, never a job.

- ``claim``: claim the job that has waited longest with a conditional update (a job whose
  worker was lost keeps its place), renew its lease, write the result fenced by the attempt
  number; ``run_device``, the torch device of a job's queue.
- ``worker``: a grading worker process (claims from the database when woken or on its
  re-check, or when a Dramatiq message rings its queue's doorbell; a broker worker that had no
  message for a while looks at the database itself). Claims and stores wait out a database
  restart.
- ``reconciler``: rings once for a job whose lease expired, fails jobs that lost their host
  too often, moves unclaimed ``prefer-gpu`` jobs to the cpu queue.
- ``broker``: the doorbell: nothing but a local wake-up when workers poll; Dramatiq messages
  on Redis or RabbitMQ, each naming the job it was sent for.
- ``supervisor``: starts and restarts worker processes for ``serve`` and ``worker``.
- ``wakeup``: datagram wake-ups on one host (and through Redis across hosts) for idle
  workers and for web requests waiting on a result.

Regrades go through the same queue: ``web.services.regrade`` puts jobs back to ``queued``.

Dispatch calls down, never up: these modules import ``web.db`` and ``web.models`` and each
other, and take what a job's end writes as a function from their caller; ``worker``, a grading
process's entry point, alone joins them to the services (``tests/test_dispatch_layers.py``).
"""
