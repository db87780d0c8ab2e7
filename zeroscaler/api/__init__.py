"""The API door: the one client of the Kubernetes API and its errors.

Callers import from here; the modules behind it are layered: `client` over `lists`, `streams` and
`discovery`, over `transport`, over `errors`, `credentials` (where the server is, who we are) and
`connections` (the client's sockets).
"""

from zeroscaler.api.client import Kube, PatchType
from zeroscaler.api.errors import (
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    Silent,
    Transient,
    Withdrawn,
    error_for,
)
from zeroscaler.api.transport import (
    ClientLimits,
    Obj,
    Priority,
    outcome_seen,
    prioritized,
    urgently,
)

__all__ = [
    "ClientLimits",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "Kube",
    "KubeError",
    "NotFound",
    "Obj",
    "PatchType",
    "Priority",
    "Silent",
    "Transient",
    "Withdrawn",
    "error_for",
    "outcome_seen",
    "prioritized",
    "urgently",
]
