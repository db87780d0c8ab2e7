"""The API's failures as our own exception classes, each saying how a caller should react."""

from __future__ import annotations

import json


class KubeError(Exception):
    """An API request failed; subclasses say how the caller should react."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(KubeError):
    """404: the object or type does not exist."""


class Conflict(KubeError):
    """409: a precondition or resourceVersion did not match; read again and decide again."""


class Forbidden(KubeError):
    """401/403: not allowed."""


class Gone(KubeError):
    """410: the resourceVersion is too old; list again."""


class Invalid(KubeError):
    """400/422: the request was rejected as malformed."""


class Transient(KubeError):
    """429, 5xx or a network error: try again later."""


class Silent(Transient):
    """A watch stream sent nothing for longer than its caller allowed: its connection is
    most likely dead, though nothing closed it."""


class Withdrawn(Exception):
    """A request whose `unless` held when its turn came: it was never sent."""


_ERRORS: dict[int, type[KubeError]] = {
    400: Invalid,
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}  # any other status, or none: Transient


def error_for(status: int, body: bytes | str) -> KubeError:
    """Map an HTTP status and a Status body to one of our error classes."""
    reason, message = "", ""
    try:
        status_obj = json.loads(body) if body else {}
        if isinstance(status_obj, dict):
            reason = str(status_obj.get("reason", ""))
            message = str(status_obj.get("message", ""))
    except (ValueError, UnicodeDecodeError):
        message = body[:500] if isinstance(body, str) else body[:500].decode(errors="replace")
    return _ERRORS.get(status, Transient)(status, reason, message)
