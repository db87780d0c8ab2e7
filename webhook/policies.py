"""The policy in force from the policy ConfigMaps; on errors the last valid one is kept."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zeroscaler.core.annotations import POLICY_KEY
from zeroscaler.core.policy import (
    DEFAULT_POLICY,
    Policy,
    PolicyDocument,
    PolicyError,
    merge_policies,
    parse_policy,
)


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
