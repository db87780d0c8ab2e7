"""A workload as the commands show it: its annotations read, what wakes it, how long it is idle,
and what it serves.

What wakes it is worked out as the controller does: kinds resolved through discovery, the scope of
each from SubjectAccessReviews for the workload's ServiceAccount (`resolve_scope`), and, for an
awake workload, the newest counted change among the objects in that scope (`newest_activity`).
What it serves too: the Services of its namespace that select its pods, and the webhook
configurations, CRD conversions and APIServices that name them (`links_of`, `find_serving`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from zeroscaler.api import Forbidden, KubeError, Obj
from zeroscaler.cli.session import Session, failure_for
from zeroscaler.controller.permissions import AccessReviews
from zeroscaler.controller.registrations import REGISTRATION_PATHS, SERVICES_PATH
from zeroscaler.core.activity import Scope
from zeroscaler.core.annotations import (
    FLAPPING,
    Pause,
    Problem,
    WorkloadConfig,
    WorkloadStatus,
    kind_list_keys,
    pause_in_force,
    paused_until_set_at,
    read_config,
    read_status,
)
from zeroscaler.core.coverage import (
    OFF,
    PROBE_WEBHOOK,
    ActivatorState,
    Hook,
    activation_block,
    hooks_of,
)
from zeroscaler.core.durations import parse_time
from zeroscaler.core.idleness import Seen, build_interest, estimate_idle_start, newest_activity
from zeroscaler.core.kinds import APIResource, Discovery, KindRef
from zeroscaler.core.links import (
    ADMISSION_KINDS,
    Link,
    LinkKind,
    ServiceRef,
    Serving,
    find_serving,
    links_of,
)
from zeroscaler.core.manual import unmanaged_reason
from zeroscaler.core.schedules import NO_SCHEDULE, ScheduleState, schedule_state
from zeroscaler.core.scope import ResolvedScope, ReviewNeeded, resolve_scope

ACCESS_TTL = 300.0  # one command's run: each question is asked once
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SERVING_PATHS: dict[LinkKind, str] = {**REGISTRATION_PATHS, "CustomResourceDefinition": CRDS_PATH}


@dataclass(frozen=True, slots=True)
class KindScope:
    """A watched or owned kind of a workload, and where its changes count: the API type it
    resolves to, the namespaces its ServiceAccount may watch it in, and the verdicts behind that."""

    ref: KindRef
    key: str  # the annotation it was read from
    owned: bool
    resource: APIResource | None = None  # None: not served, or not listable and watchable
    grant: ResolvedScope | None = None
    checked: bool = True  # False: we may not ask SubjectAccessReviews; scope as annotated
    verdicts: tuple[tuple[str, bool], ...] = ()  # (namespace asked about, allowed)

    @property
    def counts(self) -> bool:
        return self.resource is not None and self.grant is not None and self.grant.permitted


@dataclass
class WorkloadView:
    """One workload as the commands show it: its annotations read and, once inspected, its kinds
    and what was last seen to change."""

    obj: Obj
    namespace_labels: Mapping[str, str] | None
    config: WorkloadConfig
    status: WorkloadStatus
    problems: list[Problem]
    unmanaged: str
    kinds: list[KindScope] = field(default_factory=list)  # filled in by WakeInspector
    seen: Seen | None = None
    complete: bool = True  # every kind that counts could be listed
    unlisted: list[str] = field(default_factory=list)  # the ones that could not
    serving: Serving | None = None  # None: not looked at
    serving_unread: list[str] = field(default_factory=list)  # what could not be listed for it
    pause: Pause = field(default_factory=Pause)  # held by a person, at the time it was read
    schedule: ScheduleState = NO_SCHEDULE  # the windows in force when it was read

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.obj.get("metadata") or {}

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace", ""))

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.meta.get("annotations") or {}

    @property
    def replicas(self) -> int:
        return int((self.obj.get("spec") or {}).get("replicas") or 0)

    @property
    def service_account(self) -> str:
        pod = ((self.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        return str(pod.get("serviceAccountName") or pod.get("serviceAccount") or "default")

    @property
    def pod_labels(self) -> Mapping[str, str]:
        template = (self.obj.get("spec") or {}).get("template") or {}
        return (template.get("metadata") or {}).get("labels") or {}

    @property
    def paused(self) -> bool:
        return self.pause.held

    @property
    def flapping(self) -> str:
        return str(self.annotations.get(FLAPPING, ""))

    @property
    def is_awake(self) -> bool:
        return self.status.state != "asleep" and self.replicas > 0

    @property
    def idle_since(self) -> datetime | None:
        """Since when it is idle: the last activity for one asleep, the newest known if awake."""
        if not self.is_awake:
            return self.status.last_activity
        created = self.meta.get("creationTimestamp")
        return estimate_idle_start(
            self.status.last_activity, parse_time(str(created)) if created else None, self.seen
        )


def read_view(
    obj: Obj, namespace_labels: Mapping[str, str] | None, now: datetime | None = None
) -> WorkloadView:
    """The workload's annotations read, and whether it is managed (and paused, at `now`)."""
    config, problems = read_config(obj["metadata"].get("annotations") or {})
    status, status_problems = read_status(obj["metadata"].get("annotations") or {})
    namespace = str(obj["metadata"].get("namespace", ""))
    unmanaged = unmanaged_reason(config, namespace, namespace_labels)
    set_at = paused_until_set_at(obj["metadata"].get("managedFields"))
    now = now or datetime.now(UTC)  # shown to a person: the time on their machine
    pause = pause_in_force(config, set_at, now)
    return WorkloadView(
        obj,
        namespace_labels,
        config,
        status,
        problems + status_problems,
        unmanaged,
        pause=pause,
        schedule=schedule_state(config.windows, now),
    )


def index_links(registrations: Iterable[tuple[LinkKind, Obj]]) -> dict[ServiceRef, list[Link]]:
    """The links of the registrations read, by the Service each names."""
    by_service: dict[ServiceRef, list[Link]] = {}
    for kind, obj in registrations:
        for link in links_of(kind, obj):
            by_service.setdefault(link.service, []).append(link)
    return by_service


def index_hooks(registrations: Iterable[tuple[LinkKind, Obj]]) -> dict[ServiceRef, list[Hook]]:
    """The admission webhooks of the registrations read, by the Service each names."""
    by_service: dict[ServiceRef, list[Hook]] = {}
    for kind, obj in registrations:
        if kind in ADMISSION_KINDS:
            for hook in hooks_of(kind == "MutatingWebhookConfiguration", obj):
                by_service.setdefault(hook.service, []).append(hook)
    return by_service


def find_activator(registrations: Iterable[tuple[LinkKind, Obj]]) -> ActivatorState:
    """The activator as the cluster shows it: the MutatingWebhookConfiguration holding its probe
    (the controller writes it once it leads); whether it answers, only the controller knows."""
    for kind, obj in registrations:
        if kind != "MutatingWebhookConfiguration":
            continue
        if any((w or {}).get("name") == PROBE_WEBHOOK for w in obj.get("webhooks") or []):
            return ActivatorState(str(obj["metadata"].get("name", "")))
    return ActivatorState()


def serving_of(
    view: WorkloadView,
    services: Iterable[Obj],
    links: Mapping[ServiceRef, Iterable[Link]],
    hooks: Mapping[ServiceRef, Iterable[Hook]] | None = None,
    activator: ActivatorState = OFF,
) -> Serving:
    """What the workload serves, from the Services of its namespace and the links read, and
    whether the activator can answer for its webhooks, as the controller decides it."""
    selectors = [
        (str(s["metadata"].get("name", "")), (s.get("spec") or {}).get("selector"))
        for s in services
    ]
    found = find_serving(view.namespace, view.pod_labels, selectors, links, hooks)
    if not found.hooks:
        return found
    return dataclasses.replace(found, unanswered=activation_block(found.hooks, activator))


class WakeInspector:
    """Asks the cluster what wakes each workload (discovery, SubjectAccessReviews) and, for one
    awake, when it was last active (lists); each question once for all the workloads of a run."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._reviews = AccessReviews(session.kube, ACCESS_TTL)
        self._may_review = True
        self._discovery: Discovery | None = None
        self._lists: dict[tuple[APIResource, str], list[Obj] | None] = {}
        self._links: dict[ServiceRef, list[Link]] | None = None  # read once per run
        self._hooks: dict[ServiceRef, list[Hook]] = {}
        self._activator = OFF
        self._links_unread: list[str] = []
        self._services: dict[str, list[Obj] | None] = {}  # by namespace

    async def discovery(self) -> Discovery:
        if self._discovery is None:
            found = await self._session.call("GET", "/apis", self._session.kube.discover())
            self._discovery = Discovery(found)
        return self._discovery

    async def inspect(self, view: WorkloadView, *, activity: bool) -> None:
        """Fill in what wakes the workload and, if `activity` and it is awake, its idleness."""
        discovery = await self.discovery()
        lists = zip(
            (view.config.watched, view.config.owned),
            kind_list_keys(view.annotations),
            (False, True),
            strict=True,
        )
        for refs, key, owned in lists:
            for ref in refs:
                view.kinds.append(await self._kind_scope(view, discovery, ref, key, owned))
        if activity and view.is_awake and not view.unmanaged:
            await self._idleness(view)

    async def inspect_serving(self, view: WorkloadView) -> None:
        """Fill in what the workload serves; what may not be listed is named, not guessed."""
        if self._links is None:
            registrations: list[tuple[LinkKind, Obj]] = []
            self._links_unread = []
            for kind, path in SERVING_PATHS.items():
                items = await self._list_path(path)
                if items is None:
                    self._links_unread.append(f"list {path.rsplit('/', 1)[1]}")
                    continue
                registrations += [(kind, o) for o in items]
            self._links = index_links(registrations)
            self._hooks = index_hooks(registrations)
            self._activator = find_activator(registrations)
        if view.namespace not in self._services:
            path = SERVICES_PATH.replace("/services", f"/namespaces/{view.namespace}/services")
            self._services[view.namespace] = await self._list_path(path)
        services = self._services[view.namespace]
        view.serving_unread = list(self._links_unread)
        if services is None:
            view.serving_unread.append(f"list services in namespace {view.namespace}")
            services = []
        view.serving = serving_of(view, services, self._links, self._hooks, self._activator)

    async def _list_path(self, path: str) -> list[Obj] | None:
        try:
            items, _ = await self._session.kube.list_all(path)
        except Forbidden:
            return None
        except KubeError as e:
            raise failure_for(e, "GET", path, self._session.access.server) from None
        return items

    async def _kind_scope(
        self, view: WorkloadView, discovery: Discovery, ref: KindRef, key: str, owned: bool
    ) -> KindScope:
        resource = discovery.resolve(ref)
        if resource is None or not {"list", "watch"} <= resource.verbs:
            return KindScope(ref, key, owned)
        answers: dict[str, bool] = {}
        wanted = view.config.watch_namespaces
        while isinstance(
            step := resolve_scope(resource.namespaced, view.namespace, wanted, answers),
            ReviewNeeded,
        ):
            verdict = await self._may_watch(view, resource, step.namespace)
            if verdict is None:
                return KindScope(ref, key, owned, resource, _as_annotated(resource, wanted), False)
            answers[step.namespace] = verdict
        return KindScope(ref, key, owned, resource, step, True, tuple(answers.items()))

    async def _may_watch(
        self, view: WorkloadView, resource: APIResource, scope: str
    ) -> bool | None:
        if not self._may_review:
            return None
        try:
            return await self._reviews.may_watch(
                view.namespace, view.service_account, resource, scope
            )
        except Forbidden:
            self._may_review = False  # ask no more; scopes are then taken as annotated
            return None
        except KubeError as e:
            path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
            raise failure_for(e, "POST", path, self._session.access.server) from None

    async def _idleness(self, view: WorkloadView) -> None:
        counted = [
            (r.resource, r.grant.scope, r.owned)
            for r in view.kinds
            if r.resource is not None and r.grant is not None and r.grant.permitted
        ]
        interest = build_interest(
            [(r, scope) for r, scope, owned in counted if not owned],
            [(r, scope) for r, scope, owned in counted if owned],
            (view.kind, view.namespace, view.name),
            view.status.last_activity,
        )
        listed: list[tuple[APIResource, Obj]] = []
        for resource, scope, _ in counted:
            for namespace in _namespaces(resource, scope):
                objects = await self._list(resource, namespace)
                if objects is None:
                    view.complete = False
                    view.unlisted.append(describe_list(resource, namespace))
                    continue
                listed.extend((resource, o) for o in objects)
        view.seen = newest_activity(listed, interest)

    async def _list(self, resource: APIResource, namespace: str) -> list[Obj] | None:
        key = (resource, namespace)
        if key not in self._lists:
            path = resource.api_path(namespace or None)
            try:
                items, _ = await self._session.kube.list_all(path, metadata_only=True)
                self._lists[key] = items
            except Forbidden:
                self._lists[key] = None
            except KubeError as e:
                raise failure_for(e, "GET", path, self._session.access.server) from None
        return self._lists[key]


def describe_list(resource: APIResource, namespace: str) -> str:
    """`list widgets.example.com in namespace ops`: what we could not do."""
    where = f"in namespace {namespace}" if namespace else "in all namespaces"
    return (
        f"list {resource.group_resource} {where}"
        if resource.namespaced
        else (f"list {resource.group_resource}")
    )


def _namespaces(resource: APIResource, scope: Scope) -> Iterable[str]:
    if not resource.namespaced or scope is None:
        return ("",)
    return sorted(scope)


def _as_annotated(resource: APIResource, wanted: tuple[str, ...] | None) -> ResolvedScope:
    if not resource.namespaced or wanted is None or wanted == ("*",):
        return ResolvedScope(True)
    return ResolvedScope(True, frozenset(wanted))
