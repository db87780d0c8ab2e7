"""May a workload's ServiceAccount watch a resource in a namespace? SubjectAccessReview, cached."""

from __future__ import annotations

from dataclasses import dataclass

from controller.clock import Clock, LoopClock
from zeroscaler.core.kinds import APIResource
from zeroscaler.kube import SELF_ACCESS_REVIEWS, Kube, review_allowed, self_access_review

_SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class AccessKey:
    namespace: str  # the ServiceAccount's namespace
    service_account: str
    group: str
    resource: str
    scope: str  # the namespace asked about; "" for all namespaces (or cluster-scoped)
    name: str = ""  # one object, where RBAC grants only resourceNames


class AccessReviews:
    """Answers `may this ServiceAccount watch this`, remembering answers for `ttl` seconds."""

    def __init__(self, kube: Kube, ttl: float, clock: Clock | None = None) -> None:
        self._kube = kube
        self._ttl = ttl
        self._clock = clock or LoopClock()
        self._answers: dict[AccessKey, tuple[bool, float]] = {}

    def epoch(self) -> int:
        """Changes every `ttl` seconds, so callers know when their answers may be stale."""
        if self._ttl <= 0:
            return 0
        return int(self._clock.monotonic() // self._ttl)

    async def may_watch(
        self,
        namespace: str,
        service_account: str,
        resource: APIResource,
        scope: str,
        name: str = "",
    ) -> bool:
        key = AccessKey(namespace, service_account, resource.group, resource.resource, scope, name)
        now = self._clock.monotonic()
        cached = self._answers.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{namespace}:{service_account}",
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": {
                    "verb": "watch",
                    "group": resource.group,
                    "resource": resource.resource,
                    "namespace": scope if resource.namespaced else "",
                    "name": name,
                },
            },
        }
        allowed = review_allowed(await self._kube.create(_SAR_PATH, review))
        self._answers[key] = (allowed, now + self._ttl)
        return allowed

    async def may_watch_everywhere(self, resource: APIResource) -> bool:
        """Whether the controller itself may list and watch `resource` in every namespace (its
        shared watches), asked with SelfSubjectAccessReviews."""
        key = AccessKey("", "", resource.group, resource.resource, "*")
        now = self._clock.monotonic()
        cached = self._answers.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        allowed = True
        for verb in ("list", "watch"):
            review = self_access_review(verb, resource.group, resource.resource)
            allowed = allowed and review_allowed(
                await self._kube.create(SELF_ACCESS_REVIEWS, review)
            )
        self._answers[key] = (allowed, now + self._ttl)
        return allowed
