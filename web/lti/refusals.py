"""Refused LMS launches, said to the person who clicked: what happened and what to do.

pylti1p3 explains a refusal to a developer ("Invalid Nonce", "State not found"); the page
says it in the reader's language and keeps the library's words as a detail for whoever
has to look into it.
"""
from __future__ import annotations

from flask_babel import lazy_gettext as _l

AGAIN = _l("Open the activity again from your course in the LMS.")

# (words in the library's message, what the reader is told), first match wins
_REASONS = (
    ("Invalid Nonce", _l("This launch link was already used.")),
    ("Signature has expired", _l("This launch link has expired (an LMS launch is valid for "
                                 "about a minute).")),
    ("State not found", _l("This launch did not start here or took too long.")),
    ("State cookie missing outside a frame", _l("This launch did not start in this browser "
                                                "(its sign-in cookie is missing).")),
    ("Missing state param", _l("This launch did not start here or took too long.")),
    ("Signature verification failed", _l("The LMS's signature on this launch does not match: "
                                         "it may have been altered on the way.")),
    ("Can't decode id_token", _l("The LMS's signature on this launch does not match: "
                                 "it may have been altered on the way.")),
    ("Unable to find public key", _l("The LMS's signature on this launch could not be "
                                     "checked against its published keys.")),
    ("Unable to find deployment", _l("This deployment of the tool in the LMS is not accepted "
                                     "here; an administrator must add its deployment ID on "
                                     "the grader's LTI page.")),
    ("no LTI platform is registered", _l("This LMS is not registered with the grader; an "
                                         "administrator must register it on the grader's LTI "
                                         "page.")),
    ("Missing id_token", _l("The LMS sent no launch.")),
)
_OTHER = _l("The LMS launch could not be verified.")


def explain(exc: Exception) -> tuple[str, str]:
    """(the sentence for the reader, the technical detail)."""
    detail = str(exc)
    for words, sentence in _REASONS:
        if words in detail:
            return f"{sentence} {AGAIN}", detail
    return f"{_OTHER} {AGAIN}", detail
