"""The paths the API server calls zeroscaler's own webhook at, and the secret one it is given.

`/mutate` answers with the kinds a ServiceAccount may watch, inferred from RBAC: answered for
anyone who reaches the port, it would tell what RBAC the caller may not read. So a Service-backed
webhook of zeroscaler's configuration that names no path (the chart leaves it out) is given
`/mutate/<token>`, a random token only those who may read webhook configurations can see, and
reviews are answered only at a path the configuration holds. A `url` keeps the path it gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MUTATE = "/mutate"
Obj = Mapping[str, Any]


def paths_of(configuration: Obj) -> frozenset[str]:
    """Where the API server calls the configuration's webhooks: each service's path (`/` when
    it names none) or URL's path."""
    found: set[str] = set()
    for webhook in configuration.get("webhooks") or []:
        client = (webhook or {}).get("clientConfig") or {}
        service = client.get("service")
        if isinstance(service, Mapping):
            found.add(str(service.get("path") or "/"))
        elif isinstance(client.get("url"), str):
            rest = str(client["url"]).partition("://")[2]
            found.add("/" + rest.split("/", 1)[1] if "/" in rest else "/")
    return frozenset(found)


def secret_path_patch(configuration: Obj, new_token: str) -> list[dict[str, Any]] | None:
    """A JSON patch giving each Service-backed webhook without a path the secret one (the token
    one of them has already, else `new_token`), guarded by the resourceVersion; None when none
    lacks a path. It names that field alone, so an apply that leaves it out never fights it."""
    webhooks = [w for w in configuration.get("webhooks") or [] if isinstance(w, Mapping)]
    missing = [i for i, w in enumerate(webhooks) if _service_path(w) == ""]
    if not missing:
        return None
    prefix = MUTATE + "/"
    given = [p for w in webhooks if (p := _service_path(w) or "").startswith(prefix)]
    token = given[0].removeprefix(prefix) if given and given[0] != prefix else new_token
    version = (configuration.get("metadata") or {}).get("resourceVersion", "")
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version}
    ]
    for i in missing:
        field = f"/webhooks/{i}/clientConfig/service/path"
        ops.append({"op": "add", "path": field, "value": prefix + token})
    return ops


def _service_path(webhook: Obj) -> str | None:
    """A webhook's service path ("" when it names none); None when it is called by URL."""
    service = (webhook.get("clientConfig") or {}).get("service")
    return str(service.get("path") or "") if isinstance(service, Mapping) else None
