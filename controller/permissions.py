"""May a workload's ServiceAccount watch a resource in a namespace? RBAC as watched, else a
SubjectAccessReview, cached."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from zeroscaler.api import (
    Kube,
    outcome_seen,
)
from zeroscaler.cluster.access_reviews import (
    SELF_ACCESS_REVIEWS,
    review_allowed,
    self_access_review,
)
from zeroscaler.core.authorization import Request, rbac_allows
from zeroscaler.core.inference import RBACSnapshot
from zeroscaler.core.kinds import APIResource
from zeroscaler.runtime.clock import Clock, LoopClock

_SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class AccessKey:
    namespace: str  # the ServiceAccount's namespace
    service_account: str
    group: str
    resource: str
    scope: str  # the namespace asked about; "" for all namespaces (or cluster-scoped)
    name: str = ""  # one object, where RBAC grants only resourceNames


AnswerSource = Literal["rbac", "review", "cache"]


def _uncounted(source: AnswerSource) -> None:
    pass


class AccessReviews:
    """Answers `may this ServiceAccount watch this`: from the RBAC watched when it grants it,
    else by a SubjectAccessReview whose answer is remembered for `ttl` seconds."""

    def __init__(
        self,
        kube: Kube,
        ttl: float,
        clock: Clock | None = None,
        *,
        rbac: Callable[[], RBACSnapshot | None] | None = None,
        on_answer: Callable[[AnswerSource], None] = _uncounted,
    ) -> None:
        self._kube = kube
        self._ttl = ttl
        self._clock = clock or LoopClock()
        # The RBAC in force once its watches have listed (None before, or when not to be used).
        self._rbac = rbac
        self._on_answer = on_answer
        self._answers: dict[AccessKey, tuple[bool, float]] = {}
        # Reviews on their way: workloads that ask the same question meanwhile share the answer.
        self._asking: dict[AccessKey, asyncio.Task[bool]] = {}

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
        allowed, _ = await self.answer(namespace, service_account, resource, scope, name)
        return allowed

    async def answer(
        self,
        namespace: str,
        service_account: str,
        resource: APIResource,
        scope: str,
        name: str = "",
        *,
        fresh: bool = True,
    ) -> tuple[bool, bool]:
        """Whether it may watch, and whether RBAC said so (an answer that changes with RBAC);
        `fresh=False` takes a remembered review that aged less than another lifetime."""
        # RBAC only adds: what it grants the standard authorizers grant. The snapshot is current,
        # so the answer is not remembered; a refusal may be another authorizer's to lift.
        if self.rbac_grants(namespace, service_account, resource, scope, name):
            self._on_answer("rbac")
            return True, True
        key = AccessKey(namespace, service_account, resource.group, resource.resource, scope, name)
        ask = functools.partial(self._review, key, resource.namespaced)
        return await self._answer(key, ask, fresh=fresh), False

    def rbac_grants(
        self,
        namespace: str,
        service_account: str,
        resource: APIResource,
        scope: str,
        name: str = "",
    ) -> bool:
        """Whether RBAC as watched now lets the ServiceAccount watch it (False when not in use)."""
        rbac = self._rbac() if self._rbac is not None else None
        if rbac is None:
            return False
        where = scope if resource.namespaced else ""
        request = Request("watch", resource.group, resource.resource, where, name)
        return rbac_allows(rbac, namespace, service_account, request)

    async def _answer(
        self,
        key: AccessKey,
        ask: Callable[[], Awaitable[bool]],
        counted: bool = True,
        *,
        fresh: bool = True,
    ) -> bool:
        """The cached answer, else one review shared by everyone who asks until it is answered.

        A reconcile takes an aged answer (`fresh=False`): waiting inline for a review, which
        queues behind every sleep written at a busy time, held wakes that came meanwhile for
        seconds. The answers are asked again off the reconcile (`Subscriptions.prepare`)."""
        cached = self._answers.get(key)
        grace = 0.0 if fresh else self._ttl
        if cached is not None and cached[1] + grace > self._clock.monotonic():
            if counted:
                self._on_answer("cache")
            return cached[0]
        asking = self._asking.get(key)
        if asking is None:
            if counted:
                self._on_answer("review")
            # A task of its own: an asker that is cancelled does not cancel it for the others.
            asking = asyncio.ensure_future(self._remember(key, ask))
            self._asking[key] = asking
            asking.add_done_callback(lambda _: self._asking.pop(key, None))
            # A failed review's error is each asker's, or nobody's once none was left to ask.
            asking.add_done_callback(outcome_seen)
        return await asyncio.shield(asking)

    async def _remember(self, key: AccessKey, ask: Callable[[], Awaitable[bool]]) -> bool:
        asked = self._clock.monotonic()
        allowed = await ask()
        self._answers[key] = (allowed, asked + self._ttl)
        return allowed

    async def _review(self, key: AccessKey, namespaced: bool) -> bool:
        """Ask a SubjectAccessReview for the ServiceAccount in `key`."""
        namespace, service_account = key.namespace, key.service_account
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
                    "group": key.group,
                    "resource": key.resource,
                    "namespace": key.scope if namespaced else "",
                    "name": key.name,
                },
            },
        }
        return review_allowed(await self._kube.create(_SAR_PATH, review))

    async def may_watch_everywhere(self, resource: APIResource, *, fresh: bool = True) -> bool:
        """Whether the controller itself may list and watch `resource` in every namespace (its
        shared watches), asked with SelfSubjectAccessReviews."""
        key = AccessKey("", "", resource.group, resource.resource, "*")
        ask = functools.partial(self._self_review, key)
        return await self._answer(key, ask, counted=False, fresh=fresh)

    async def _self_review(self, key: AccessKey) -> bool:
        """Ask SelfSubjectAccessReviews for list and watch of the type in `key`."""
        allowed = True
        for verb in ("list", "watch"):
            review = self_access_review(verb, key.group, key.resource)
            allowed = allowed and review_allowed(
                await self._kube.create(SELF_ACCESS_REVIEWS, review)
            )
        return allowed
