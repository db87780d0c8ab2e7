"""Where the API server calls the webhook: the paths its own configuration holds.

A review is answered only at one of them (`zeroscaler.core.webhook_paths`); the controller gives
a Service-backed webhook without a path a secret one. A path not in the watched copy is looked up
once more in a fresh read (at most once a second), as a configuration written a moment ago may
reach the API server first; a path taken out is still answered at for a grace period.
"""

from __future__ import annotations

import asyncio
import logging

from zeroscaler.api import Kube, KubeError, Obj
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.core.webhook_paths import MUTATE, paths_of

log = logging.getLogger(__name__)

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
GRACE = 30.0  # seconds a path taken out of the configuration is still answered at
FRESH_READ_EVERY = 1.0  # seconds between reads made for a path the watch does not know


class OwnPaths:
    """The webhook's own configuration, watched by name: the paths reviews are taken at."""

    def __init__(self, kube: Kube | None, configuration: str) -> None:
        self._kube = kube
        self._configuration = configuration
        self._paths: frozenset[str] = frozenset()
        self._gone: dict[str, float] = {}  # path: when it was taken out
        self._last_fresh = -FRESH_READ_EVERY
        self._reading = asyncio.Lock()
        self.informer: Informer | None = None
        if kube is not None and configuration:
            self.informer = Informer(
                kube,
                CONFIGURATIONS,
                params={"fieldSelector": f"metadata.name={configuration}"},
                transform=_trim,
            )
            self.informer.add_handler(self._on_configuration)

    async def accepts(self, path: str) -> bool:
        """Whether a review sent to `path` is one the API server sends to this webhook."""
        if self.informer is None:
            return path == MUTATE  # no configuration named: the one fixed path
        now = asyncio.get_running_loop().time()
        if path in self._paths or now - self._gone.get(path, -GRACE) < GRACE:
            return True
        if now - self._last_fresh < FRESH_READ_EVERY:
            return False
        async with self._reading:
            if now - self._last_fresh >= FRESH_READ_EVERY:
                self._last_fresh = now
                await self._read_fresh()
        return path in self._paths

    async def _read_fresh(self) -> None:
        assert self._kube is not None
        try:
            found = await self._kube.get(f"{CONFIGURATIONS}/{self._configuration}")
        except KubeError as e:
            log.warning("the webhook configuration could not be read: %s", e)
            return
        self._set(paths_of(found))

    def _on_configuration(self, event: WatchEvent) -> None:
        self._set(frozenset() if event.type == "DELETED" else event.obj["paths"])

    def _set(self, paths: frozenset[str]) -> None:
        now = asyncio.get_running_loop().time()
        for gone in self._paths - paths:
            self._gone[gone] = now
        self._gone = {p: t for p, t in self._gone.items() if now - t < GRACE and p not in paths}
        self._paths = paths


def _trim(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "resourceVersion") if k in meta}
    return {"metadata": kept, "paths": paths_of(obj)}
