"""What a worker host does every ``RECONCILE_SECONDS`` beside grading: a reconciler round
(``services.grading.reconcile_jobs``) and the LMS grade passback (``lti.passback.send_due``).

``attn-grader worker`` and ``serve`` hand ``host_round`` to their supervisor. It lives here,
beside the commands and above dispatch, services and LTI, so that the supervisor (in
``web.dispatch``) imports none of them: dispatch calls down, never up.
"""
from __future__ import annotations

import logging

from .lti.passback import send_due
from .services.grading import reconcile_jobs

log = logging.getLogger(__name__)


def host_round(engine, dispatcher, config: dict) -> None:
    """One round; a failure of either part is logged and retried at the next round."""
    interval = config["RECONCILE_SECONDS"]
    try:
        reconcile_jobs(engine, dispatcher,
                       queued_stale_seconds=float(config["QUEUED_STALE_SECONDS"]))
    except Exception:
        log.exception("reconciler run failed; retrying in %s s", interval)
    try:  # LMS grade passback: due scores go out (leased, so any host may run this)
        send_due(engine, lease_seconds=float(config["LEASE_SECONDS"]))
    except Exception:
        log.exception("LTI grade passback run failed; retrying in %s s", interval)
