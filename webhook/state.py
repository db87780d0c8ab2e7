"""What an admission decision reads: a consistent view of policy, RBAC, discovery and namespaces."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from zeroscaler.core.inference import RBACSnapshot
from zeroscaler.core.kinds import Discovery
from zeroscaler.core.policy import DEFAULT_POLICY, Policy


@dataclass(frozen=True)
class View:
    """The inputs of one decision."""

    policy: Policy = DEFAULT_POLICY
    rbac: RBACSnapshot = field(default_factory=RBACSnapshot)
    discovery: Discovery = field(default_factory=Discovery)
    custom_resources: frozenset[str] | None = None


class Source(Protocol):
    """Where the app gets its view; the live one is kept by watches, never by request-time calls."""

    def is_ready(self) -> bool: ...

    async def wait_ready(self) -> None: ...

    def view(self) -> View: ...

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class StaticSource:
    """A fixed view, for running the app without a cluster (tests, the benchmark's baseline)."""

    fixed: View = field(default_factory=View)
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    ready: bool = True

    def is_ready(self) -> bool:
        return self.ready

    async def wait_ready(self) -> None:
        if not self.ready:
            await asyncio.Event().wait()  # a fixed view that is not ready never becomes ready

    def view(self) -> View:
        return self.fixed

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None
