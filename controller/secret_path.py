"""Gives zeroscaler's own webhook configuration its secret path, and keeps it.

The chart leaves the path of its Service-backed webhook out; the leader writes `/mutate/<token>`
in (`zeroscaler.core.webhook_paths`), and again whenever an install or upgrade writes the
configuration without it. The controller writes it, not the webhook: the process that takes
requests from any pod holds no write access to any webhook configuration for it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets

from zeroscaler.api import Conflict, Invalid, Kube, KubeError, NotFound
from zeroscaler.cluster.informer import WatchEvent
from zeroscaler.controller.context import Context
from zeroscaler.core.webhook_paths import secret_path_patch

log = logging.getLogger(__name__)

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
RETRY = 5.0  # seconds after a failed write


class SecretPath:
    """Writes the secret path into the configuration `name` when the leader finds it missing."""

    def __init__(self, kube: Kube, context: Context, name: str) -> None:
        self._kube = kube
        self._name = name
        self._is_leader = context.is_leader
        self._look = asyncio.Event()
        self._look.set()  # once at the start

    def on_configuration(self, event: WatchEvent) -> None:
        """A MutatingWebhookConfiguration changed: look again if it is zeroscaler's own."""
        if event.obj["metadata"].get("name") == self._name and event.type != "DELETED":
            self._look.set()

    def leading(self) -> None:
        """Leadership began: look again (a write may have been missed while standing by)."""
        self._look.set()

    async def run(self) -> None:
        while True:
            await self._look.wait()
            self._look.clear()
            if not self._is_leader():
                continue
            try:
                await self._write()
            except (Conflict, Invalid):
                self._look.set()  # written meanwhile: read it again
            except KubeError as e:
                log.warning("the webhook configuration's secret path not written: %s", e)
                await asyncio.sleep(RETRY)
                self._look.set()

    async def _write(self) -> None:
        try:
            configuration = await self._kube.get(f"{CONFIGURATIONS}/{self._name}")
        except NotFound:
            return  # not installed yet: its watch event brings us back
        ops = secret_path_patch(configuration, secrets.token_urlsafe(18))
        if ops is None:
            return
        await self._kube.patch(f"{CONFIGURATIONS}/{self._name}", ops, "json")
        log.info("webhook path made secret", extra={"configuration": self._name})
