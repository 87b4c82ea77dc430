"""Errors as HTTP answers: every error is one line of JSON, `{"error": "..."}`.

cag's user-facing errors (`CagError`: the message names the problem and the fix) are the client's
to fix: 4xx (the typed ones below carry their status; a store another process is writing: 409;
any other CagError: 400), except a full disk, the server's: 507. Anything else is the server's fault: 500 with a one-line message, and
the traceback in the log.
"""

import logging

from cag.errors import CagError, DiskFullError, StoreBusyError

log = logging.getLogger(__name__)


class HttpError(CagError):
    """A CagError with its HTTP status."""

    status = 400


class UnknownModelError(HttpError):
    status = 404


class NotFoundError(HttpError):
    status = 404


class ForbiddenPathError(HttpError):
    status = 403


def status_of(exc: BaseException) -> int:
    if isinstance(exc, HttpError):
        return exc.status
    if isinstance(exc, StoreBusyError):
        return 409
    if isinstance(exc, DiskFullError):
        return 507  # Insufficient Storage: nothing the client can change
    if isinstance(exc, CagError):
        return 400
    return 500


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def message_of(exc: BaseException) -> str:
    """The one-line message a client sees (a 500 hides internals but names the type)."""
    if isinstance(exc, CagError):
        return one_line(exc)
    return one_line(f"Internal error ({type(exc).__name__}); the server log has the details.")


def error_body(exc: BaseException) -> tuple[int, dict]:
    status = status_of(exc)
    if status >= 500:
        log.error("internal error: %s", exc, exc_info=exc)
    return status, {"error": message_of(exc)}
