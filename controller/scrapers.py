"""Who may read the controller's /metrics: as kube-rbac-proxy decides, the API server is asked.

The metrics name every managed workload, so they are no more public than the workloads are. A
scrape must carry a bearer token that the API server vouches for (a TokenReview) and whose user
may `get` the path (a SubjectAccessReview of a non-resource URL, the grant Prometheus usually
has: `nonResourceURLs: [/metrics]`). Answers are kept for a minute by the token's hash, so a
scrape every few seconds costs two reviews a minute, and a flood of made-up tokens costs at
most one pair of reviews per distinct token, one at a time.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from zeroscaler.api import Kube, KubeError
from zeroscaler.runtime.clock import Clock

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
KEPT = 256  # answers kept, by token hash
MAX_TOKEN = 16 * 1024  # bytes: longer is no token the API server issues


class ScrapeAccess:
    """Decides whether a request's bearer token may read a path: 200, 401 or 403."""

    def __init__(self, kube: Kube, clock: Clock, ttl: float = 60.0) -> None:
        self._kube = kube
        self._clock = clock
        self._ttl = ttl
        self._answers: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._one_at_a_time = asyncio.Lock()  # reviews never pile up behind made-up tokens

    async def status(self, headers: Mapping[str, str], path: str) -> int:
        """200 when the request's token may `get` `path`, 401 without a good token, 403 when
        its user may not."""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN:
            return 401
        key = hashlib.sha256(f"{path}\n{token}".encode()).hexdigest()
        if (kept := self._kept(key)) is not None:
            return kept
        async with self._one_at_a_time:
            if (kept := self._kept(key)) is not None:
                return kept
            answer = await self._review(token, path)
        self._answers[key] = (answer, self._clock.monotonic())
        while len(self._answers) > KEPT:
            self._answers.popitem(last=False)
        return answer

    def _kept(self, key: str) -> int | None:
        found = self._answers.get(key)
        if found is None or self._clock.monotonic() - found[1] > self._ttl:
            return None
        self._answers.move_to_end(key)
        return found[0]

    async def _review(self, token: str, path: str) -> int:
        try:
            review = await self._kube.create(TOKEN_REVIEWS, _token_review(token))
            status: Mapping[str, Any] = review.get("status") or {}
            if not status.get("authenticated"):
                return 401
            access = await self._kube.create(ACCESS_REVIEWS, _access_review(status, path))
        except KubeError as e:
            log.warning("a metrics scrape could not be authorized: %s", e)
            return 401 if e.status in (0, 401) else 403
        return 200 if (access.get("status") or {}).get("allowed") else 403


def _token_review(token: str) -> dict[str, Any]:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }


def _access_review(status: Mapping[str, Any], path: str) -> dict[str, Any]:
    user: Mapping[str, Any] = status.get("user") or {}
    spec: dict[str, Any] = {
        "nonResourceAttributes": {"path": path, "verb": "get"},
        "user": str(user.get("username") or ""),
        "groups": [str(g) for g in user.get("groups") or []],
    }
    if user.get("uid"):
        spec["uid"] = str(user["uid"])
    if user.get("extra"):
        spec["extra"] = dict(user["extra"])
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
