"""One MutatingWebhookConfiguration watched by name, read as the paths the API server calls.

The API server learns of a configuration from its own watch, so a path written a moment ago may be
called before this watch shows it, and a path taken out a moment ago may still be called: a path
not known is looked up once more in a fresh read (at most once a second, so made-up paths cost
nothing), and a path taken out stays known for a grace period.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from zeroscaler.api import Kube, KubeError, Obj
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.runtime.clock import Clock, LoopClock

log = logging.getLogger(__name__)

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
GRACE = 30.0  # seconds a path taken out of the configuration still counts
FRESH_READ_EVERY = 1.0  # seconds between reads made for a path the watch does not know
T = TypeVar("T")


class ConfigurationPaths(Generic[T]):
    """The paths of the configuration `name`, each with what `read` finds behind it."""

    def __init__(
        self,
        kube: Kube | None,
        name: str,
        read: Callable[[Obj], Mapping[str, T]],
        clock: Clock | None = None,
    ) -> None:
        self._kube = kube
        self._clock: Clock = clock or LoopClock()
        self._name = name
        self._read = read
        self._paths: Mapping[str, T] = {}
        self._gone: dict[str, tuple[T, float]] = {}  # path: what it had, when taken out
        self._last_fresh = -FRESH_READ_EVERY
        self._reading = asyncio.Lock()
        self.informer: Informer | None = None
        if kube is not None and name:
            self.informer = Informer(
                kube,
                CONFIGURATIONS,
                params={"fieldSelector": f"metadata.name={name}"},
                transform=self._trim,
            )
            self.informer.add_handler(self._on_configuration)

    @property
    def known(self) -> Mapping[str, T]:
        """The paths as last read (without those in their grace period)."""
        return self._paths

    async def find(self, path: str) -> T | None:
        """What is behind `path`, or None when the configuration does not call it."""
        if self.informer is None:
            return None
        now = self._clock.monotonic()
        found = self._paths.get(path)
        if found is None and path in self._gone:
            value, since = self._gone[path]
            found = value if now - since < GRACE else None
        if found is not None or now - self._last_fresh < FRESH_READ_EVERY:
            return found
        async with self._reading:
            if now - self._last_fresh >= FRESH_READ_EVERY:
                self._last_fresh = now
                await self._read_fresh()
        return self._paths.get(path)

    async def _read_fresh(self) -> None:
        assert self._kube is not None
        try:
            obj = await self._kube.get(f"{CONFIGURATIONS}/{self._name}")
        except KubeError as e:
            log.warning("configuration %s could not be read: %s", self._name, e)
            return
        self._set(self._read(obj))

    def _trim(self, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        kept = {k: meta[k] for k in ("name", "resourceVersion") if k in meta}
        return {"metadata": kept, "paths": self._read(obj)}

    def _on_configuration(self, event: WatchEvent) -> None:
        self._set({} if event.type == "DELETED" else event.obj["paths"])

    def _set(self, paths: Mapping[str, T]) -> None:
        now = self._clock.monotonic()
        for path, value in self._paths.items():
            if path not in paths:
                self._gone[path] = (value, now)
        self._gone = {p: g for p, g in self._gone.items() if now - g[1] < GRACE and p not in paths}
        self._paths = paths
