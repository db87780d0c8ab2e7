"""The activator's controller side: keep its webhook configuration covering the sleeping backends.

`zeroscaler.core.coverage` decides what the configuration holds; this keeps it written (by the
leader only, and only the one configuration the chart made), proves the API server calls it with a
dry-run probe before a backend is put to sleep, and turns the webhook's wake requests (in a
ConfigMap the webhook may write, one key a workload) into activity. A probe that goes unanswered
makes every backend it covers wake, until the activator answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zeroscaler.api import Kube, KubeError, NotFound, Obj
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.controller.context import Context
from zeroscaler.controller.noting import OnActivity
from zeroscaler.controller.registrations import ServingIndex
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.controller.workload_object import WorkloadObject
from zeroscaler.core.activity import Activity
from zeroscaler.core.coverage import (
    ActivatorState,
    Covered,
    Health,
    Hook,
    activation_block,
    bounded_timeout,
    needs_cover,
    parse_request_key,
    probe_answered,
    probe_lease,
    render,
    tokens_of,
)
from zeroscaler.core.disclosure import safe_text
from zeroscaler.core.durations import parse_time
from zeroscaler.core.links import Serving
from zeroscaler.core.wake_path import Backend, Surroundings, blockers

log = logging.getLogger(__name__)

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
PROBE_ATTEMPTS = 50  # the API server's configuration cache follows a write within moments
PROBE_PAUSE = 0.1


@dataclass(frozen=True, slots=True)
class ActivatorSettings:
    """The activator's flags: its configuration and zeroscaler's own, the namespace and ConfigMap
    the webhook writes wake requests to, how long a request is held, and the probe's interval."""

    configuration: str
    webhook_configuration: str
    namespace: str
    requests: str
    timeout: int
    probe_interval: float


class Activator:
    """Covers the webhooks of backends from before their sleep until they are Ready again."""

    def __init__(
        self,
        kube: Kube,
        context: Context,
        index: ServingIndex,
        workloads: Mapping[WorkloadKey, Workload],
        settings: ActivatorSettings,
        on_activity: OnActivity,
    ) -> None:
        self._kube = kube
        self._index = index
        self._workloads = workloads
        self._webhook_configuration = settings.webhook_configuration
        self._namespace = namespace = settings.namespace
        self._timeout = settings.timeout
        self._probe_interval = settings.probe_interval
        self._clock = context.clock
        self._is_leader = context.is_leader
        self._enqueue = context.enqueue
        self._on_activity = on_activity
        self.state = ActivatorState(settings.configuration)
        self._backends: set[WorkloadKey] = set()  # workloads seen serving admission webhooks
        self._going_to_sleep: set[WorkloadKey] = set()
        self._written: list[dict[str, Any]] | None = None  # what we last wrote, and its token
        self._token = ""
        self._tokens: dict[str, str] | None = None  # each covered webhook's path token, by name
        self._version = ""  # the configuration's resourceVersion after our write
        self._seen_version = ""  # ... and as last watched
        self._dirty = asyncio.Event()
        self._lock = asyncio.Lock()
        self._requests: dict[str, str] = {}  # key: value last seen
        self._base: Obj | None = None  # zeroscaler's own client settings, read when they change
        self.requests = Informer(
            kube,
            f"/api/v1/namespaces/{namespace}/configmaps",
            params={"fieldSelector": f"metadata.name={settings.requests}"},
        )
        self.requests.add_handler(self.on_requests)

    @property
    def enabled(self) -> bool:
        return self.state.enabled

    def activation(
        self,
        key: WorkloadKey,
        obj: WorkloadObject,
        started_in: float | None,
        hooks: tuple[Hook, ...],
        around: Surroundings,
        *,
        fail_open_allowed: bool,
    ) -> str | None:
        """Why the workload of `key`, which serves these webhooks, cannot sleep with the activator
        answering for them, or None: the activator cannot serve them; its last start
        (`started_in` seconds from its wake to Ready, as the idle clock saw it) took longer than
        a request is held; one of them would refuse a request its own wake needs
        (`core.wake_path`); or one is fail-open and no policy lets such a backend sleep."""
        block = activation_block(hooks, self.state)
        if block is not None:
            return block
        held = bounded_timeout(self._timeout) - 1
        started = started_in
        if started is not None and started > held:
            return (
                f"its last start took {started:.0f}s from its wake to Ready, longer than the "
                f"{held}s the activator holds a request it covers"
            )
        kind, namespace, name = key
        services = self._index.services_of(namespace, obj)
        backend = Backend(kind, namespace, name, dict(obj.pod_labels), services)
        found = blockers(hooks, backend, around)
        if found:
            more = f" (and {len(found) - 1} more of its webhooks)" if len(found) > 1 else ""
            return f"asleep, it could not wake: {found[0]}{more}"
        fail_open = [h for h in hooks if not h.fails]
        if fail_open and not fail_open_allowed:
            return (
                f"{fail_open[0]} has failurePolicy Ignore: a request it covers that comes before "
                "the backend is Ready again would be admitted unreviewed (a policy may allow "
                "that: failOpenWebhooks: sleep)"
            )
        return None

    def serving(self, key: WorkloadKey, obj: WorkloadObject) -> Serving | None:
        """What the workload of `key` serves (the index's answer), noting the backends whose
        cover may change."""
        found = self._index.serving(key, obj)
        if found is not None and found.hooks:
            self._backends.add(key)
            self.changed()
        elif key in self._backends:
            self._backends.discard(key)
            self.changed()
        return found

    def changed(self) -> None:
        """Coverage may differ: the run loop writes the configuration again if it does."""
        self._dirty.set()

    def on_configuration(self, event: WatchEvent) -> None:
        """A MutatingWebhookConfiguration changed: ours (someone else wrote it) or zeroscaler's
        own (its caBundle, which the copies carry)."""
        name = str(event.obj["metadata"].get("name", ""))
        if name == self.state.configuration:
            self._seen_version = str(event.obj["metadata"].get("resourceVersion", ""))
            if event.type == "DELETED" or self._seen_version != self._version:
                self.changed()
        elif name == self._webhook_configuration:
            self._base = None  # read again, and written with the new client settings
            self.changed()

    def _covered(self) -> list[Covered]:
        found: list[Covered] = []
        for key in list(self._backends):
            w = self._workloads.get(key)
            if w is None or w.deleted:
                self._backends.discard(key)
                continue
            covered = self._cover_of(w)
            if covered is not None:
                found.append(covered)
        return found

    def _cover_of(self, w: Workload) -> Covered | None:
        """`w` and the webhooks to cover for it, or None when it needs no cover now."""
        serving = self._index.serving(w.key, w.obj) if not w.deleted else None
        if serving is None or not serving.hooks or not w.managed:
            return None
        if serving.unanswered is not None:
            return None  # it is not put to sleep, and an asleep one is being woken
        if not needs_cover(
            asleep=w.shown_status.state == "asleep" or w.replicas == 0,
            starting=w.idle.starting,
            going_to_sleep=w.key in self._going_to_sleep,
        ):
            return None
        return Covered(w.key[0], w.key[1], w.key[2], serving.hooks)

    async def _client_config(self) -> Obj:
        """zeroscaler's webhook as its own configuration reaches it (service or url, caBundle)."""
        if self._base is not None:
            return self._base
        obj = await self._kube.get(f"{CONFIGURATIONS}/{self._webhook_configuration}")
        for webhook in obj.get("webhooks") or []:
            client = webhook.get("clientConfig")
            if isinstance(client, Mapping):
                self._base = dict(client)
                return self._base
        raise NotFound(404, "NotFound", f"{self._webhook_configuration} has no webhook")

    async def sync(self) -> str:
        """Write the configuration if what it must hold changed; returns the probe token."""
        async with self._lock:
            if not self._is_leader() or not self._index.is_synced():
                return self._token
            covered = self._covered()
            base = await self._client_config()
            tokens = await self._path_tokens()
            webhooks, token = render(
                covered, base, self._timeout, self._namespace, lambda name: _token(tokens, name)
            )
            self._tokens = {str(w["name"]): tokens[str(w["name"])] for w in webhooks[1:]}
            if webhooks == self._written and self._seen_version in ("", self._version):
                return token
            answer = await self._kube.patch(
                f"{CONFIGURATIONS}/{self.state.configuration}", {"webhooks": webhooks}
            )
            self._written, self._token = webhooks, token
            self._version = str((answer.get("metadata") or {}).get("resourceVersion", ""))
            log.info(
                "activator configuration written",
                extra={"covered": ",".join("/".join(b[1:3]) for b in _keys(covered))},
            )
            return token

    async def _path_tokens(self) -> dict[str, str]:
        """The tokens of the paths the configuration holds: read from it once, then kept, so a
        rewrite never changes a path the API server may be calling."""
        if self._tokens is None:
            try:
                found = await self._kube.get(f"{CONFIGURATIONS}/{self.state.configuration}")
            except NotFound:
                found = {}
            self._tokens = tokens_of(found)
        return dict(self._tokens)

    async def probe(self, token: str, attempts: int = PROBE_ATTEMPTS) -> bool:
        """Whether the API server calls the activator with the content `token`: a dry-run
        Lease create it covers must come back with the activator's warning."""
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self._namespace}/leases"
        for attempt in range(attempts):
            try:
                warnings = await self._kube.create_warnings(path, probe_lease(token))
            except KubeError as e:
                log.warning("activator probe failed: %s", e)
                warnings = []
            if probe_answered(warnings, token):
                return True
            if attempt + 1 < attempts:
                await asyncio.sleep(PROBE_PAUSE)
        return False

    async def cover(self, key: WorkloadKey, obj: WorkloadObject) -> bool:
        """Before the workload of `key` is put to sleep: cover its webhooks and prove the API
        server calls the activator. False (and the activator marked failed) when it cannot be
        proven."""
        serving = self._index.serving(key, obj)
        if serving is None or not serving.hooks:
            return True
        self._going_to_sleep.add(key)
        try:
            token = await self.sync()
            answered = await self.probe(token)
        except KubeError as e:
            log.warning("covering failed: %s", e, extra={"workload": "/".join(key)})
            answered = False
        self._set_health("serving" if answered else "failed")
        return answered

    def covered_done(self, key: WorkloadKey) -> None:
        """Its sleep was written or called off: from now its state says whether it is covered."""
        if self._going_to_sleep:
            self._going_to_sleep.discard(key)
            self.changed()

    def _set_health(self, health: Health) -> None:
        if health == self.state.health:
            return
        was = self.state.health
        self.state = ActivatorState(self.state.configuration, health)
        log.log(
            logging.WARNING if health == "failed" else logging.INFO,
            "activator %s",
            "unanswered: its backends are woken" if health == "failed" else "answers",
            extra={"was": was},
        )
        for key in self._backends:  # what it serves decides differently now
            self._enqueue(key)

    async def run(self) -> None:
        """Write the configuration when coverage changes; probe it now and then while it
        covers anything, and keep the backends awake while it goes unanswered."""
        if not self.enabled:
            return
        next_probe = self._clock.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._probe_interval):
                    await self._dirty.wait()
            self._dirty.clear()
            try:
                token = await self.sync()
                now = self._clock.monotonic()
                if self._is_leader() and now >= next_probe and self._worth_probing():
                    next_probe = now + self._probe_interval
                    self._set_health("serving" if await self.probe(token, 20) else "failed")
            except KubeError as e:
                log.warning("activator configuration not written: %s", e)
                await asyncio.sleep(1.0)
                self.changed()

    def _worth_probing(self) -> bool:
        """While it covers anything, or is marked failed (to see it answer again)."""
        return bool(self._written and len(self._written) > 1) or self.state.health == "failed"

    def on_requests(self, event: WatchEvent) -> None:
        """The webhook asked for wakes: each changed key is activity for its workload."""
        if event.type == "DELETED":
            self._requests.clear()
            return
        data: Mapping[str, str] = event.obj.get("data") or {}
        now = self._clock.now()
        for key, value in data.items():
            if self._requests.get(key) == value:
                continue
            self._requests[key] = value
            target = parse_request_key(key)
            w = None if target is None else self._workloads.get(target)
            if w is None or self._cover_of(w) is None:
                continue  # only a backend covered now is woken by a request
            at, what = _parse_request(value)
            since = w.shown_status.asleep_since
            if event.initial and (at is None or since is None or at <= since):
                continue  # asked for before its sleep: not news
            reason = f"admission request: {safe_text(what)}" if what else "admission request"
            found = Activity(w.kind, w.namespace, w.name, reason)
            asleep = w.shown_status.state == "asleep"
            self._on_activity(w.key, w.idle, asleep, found, now)


def _parse_request(value: str) -> tuple[datetime | None, str]:
    """(when, what) of one wake request, as the webhook writes it."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return None, ""
    if not isinstance(parsed, dict):
        return None, ""
    at: datetime | None = None
    with contextlib.suppress(ValueError, TypeError):
        at = parse_time(str(parsed.get("at")))
    return at, str(parsed.get("what") or "")


def _keys(covered: Iterable[Covered]) -> list[tuple[str, str, str]]:
    return [(c.kind, c.namespace, c.name) for c in covered]


def _token(tokens: dict[str, str], name: str) -> str:
    """The path token of the covered webhook `name`: the one it has, or a new unguessable one."""
    if name not in tokens:
        tokens[name] = secrets.token_urlsafe(18)
    return tokens[name]
