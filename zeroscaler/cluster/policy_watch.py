"""The policy in force from the policy ConfigMaps; on errors the last valid one is kept.

Both components keep one: the webhook applies it at admission, the controller to what exists.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zeroscaler.api import Kube
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.core.annotations import POLICY_KEY, POLICY_LABEL
from zeroscaler.core.policy import (
    DEFAULT_POLICY,
    Policy,
    PolicyDocument,
    PolicyError,
    merge_policies,
    parse_policy,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Rejection:
    """A ConfigMap whose policy was not taken, and why."""

    namespace: str
    name: str
    uid: str
    message: str


class PolicyKeeper:
    """Tracks each policy ConfigMap's last valid document and the merged policy in force."""

    def __init__(self) -> None:
        self.policy: Policy = DEFAULT_POLICY
        self._docs: dict[str, PolicyDocument] = {}

    def update(self, configmap: Mapping[str, Any]) -> Rejection | None:
        """Take a new or changed ConfigMap; on error keep what was in force and say why."""
        meta = configmap.get("metadata") or {}
        source = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        data = configmap.get("data") or {}
        text = data.get(POLICY_KEY) if isinstance(data, Mapping) else None
        try:
            if not isinstance(text, str):
                raise PolicyError(
                    [f"{source}: no {POLICY_KEY} key (expected policy YAML under it)"]
                )
            doc = parse_policy(text, source)
            merged = merge_policies([*(d for s, d in self._docs.items() if s != source), doc])
        except PolicyError as e:
            return self._rejection(meta, e)
        self._docs[source] = doc
        self.policy = merged
        return None

    def remove(self, configmap: Mapping[str, Any]) -> Rejection | None:
        """Forget a deleted ConfigMap."""
        meta = configmap.get("metadata") or {}
        source = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if source not in self._docs:
            return None
        rest = [d for s, d in self._docs.items() if s != source]
        try:
            merged = merge_policies(rest)
        except PolicyError as e:
            return self._rejection(meta, e)
        del self._docs[source]
        self.policy = merged
        return None

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(sorted(self._docs))

    def _rejection(self, meta: Mapping[str, Any], error: PolicyError) -> Rejection:
        kept = ", ".join(self.policy.sources) or "built-in defaults"
        return Rejection(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            message=f"invalid policy, keeping the last valid one ({kept}): {error}",
        )


class PolicyWatch:
    """Watches the policy ConfigMaps of one namespace into a keeper, telling of each outcome.

    `on_change` is called once the first list is in and after each change taken later;
    `on_rejected` with each ConfigMap that was not taken (the last valid policy stays). A second
    component in the same process adds its own callbacks with `listen`.
    """

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        *,
        on_change: Callable[[], None],
        on_rejected: Callable[[Rejection], None],
    ) -> None:
        self.keeper = PolicyKeeper()
        self.informer = Informer(
            kube,
            f"/api/v1/namespaces/{namespace}/configmaps",
            params={"labelSelector": f"{POLICY_LABEL}=true"},
        )
        self._changed = [on_change]
        self._rejected = [on_rejected]
        self.informer.add_handler(self._on_event)

    def listen(
        self, *, on_change: Callable[[], None], on_rejected: Callable[[Rejection], None]
    ) -> None:
        """Also call these on each change taken and each ConfigMap rejected."""
        self._changed.append(on_change)
        self._rejected.append(on_rejected)

    def _on_change(self) -> None:
        for listener in self._changed:
            listener()

    def _on_rejected(self, rejection: Rejection) -> None:
        for listener in self._rejected:
            listener(rejection)

    @property
    def policy(self) -> Policy:
        return self.keeper.policy

    def is_synced(self) -> bool:
        return self.informer.synced.is_set()

    async def run(self) -> None:
        """Watch until cancelled."""
        await asyncio.gather(self.informer.run(), self._announce_synced())

    async def _announce_synced(self) -> None:
        await self.informer.synced.wait()
        self._on_change()

    def _on_event(self, event: WatchEvent) -> None:
        before = self.keeper.policy
        if event.type == "DELETED":
            rejection = self.keeper.remove(event.obj)
        else:
            rejection = self.keeper.update(event.obj)
        if rejection is not None:
            self._on_rejected(rejection)
            return
        if not event.initial and self.keeper.policy != before:
            self._on_change()
