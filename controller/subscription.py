"""What each workload subscribes to: its kinds resolved to served types, the scopes its
ServiceAccount may watch them in, and the shared watches it holds."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from zeroscaler.api import KubeError
from zeroscaler.cluster.informer import Readable
from zeroscaler.controller.context import Context, Watching
from zeroscaler.controller.watch_memory import Scopes, WatchMemory
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.core.activity import (
    Activity,
    Change,
    GroupKind,
    Interest,
    Scope,
    definitions_of,
    due_of,
    find_activity,
    is_in_interest,
    scope_alone,
    working_namespaces,
)
from zeroscaler.core.annotations import (
    CENSUS,
    DUE_TIMES,
    Notice,
    WorkloadConfig,
    WorkloadStatus,
    kind_list_keys,
)
from zeroscaler.core.census import (
    Census,
    KindTally,
    combined,
    difference,
    namespaces_to_read,
    newest_object,
    parse_census,
    plain_tally,
    tally,
)
from zeroscaler.core.disclosure import object_words
from zeroscaler.core.due import NO_DUE, DueSummary, DueTime, as_time, summarize
from zeroscaler.core.kinds import KIND_REF_FORM, APIResource, KindRef
from zeroscaler.core.scope import ResolvedScope, ReviewNeeded, resolve_scope
from zeroscaler.core.sharing import NOTHING, compact_mapping, shared

OnActivity = Callable[[Workload, Activity, datetime], None]
NO_DUE_FIELDS: Mapping[APIResource, frozenset[tuple[str, ...]]] = {}


class Subscriptions:
    """Resolves kinds and scopes for a workload and (un)subscribes its shared watches."""

    def __init__(
        self,
        context: Context,
        watching: Watching,
        on_activity: OnActivity,
    ) -> None:
        self._hub = watching.hub
        self._access = watching.access
        self._cluster = watching.cluster
        self._clock = context.clock
        self._on_activity = on_activity
        self._background = context.background
        self._enqueue = context.enqueue
        # Workloads whose aged access answers are being asked again, and those just answered.
        self._asking: set[WorkloadKey] = set()
        self._answered: set[WorkloadKey] = set()
        # Per workload, what RBAC as watched let it watch: a change that takes one back makes
        # it look again (a refusal was a review's, asked again as it ages).
        self._granted: dict[WorkloadKey, tuple[tuple[APIResource, str, str], ...]] = {}
        self._revisions: dict[WorkloadKey, int] = {}  # grants taken back, part of the signature

    def recall_census(self, w: Workload) -> None:
        """Asleep before we watched: the kinds of the census its sleep recorded are compared
        once their watches have listed (`check_census`)."""
        w.watch.unchecked = shared(frozenset(parse_census(w.annotations.get(CENSUS, ""))[0]))

    def forget(self, w: Workload) -> None:
        """No longer managed: no watch held, and its kinds resolved afresh if it is again."""
        self.subscribe(w, set())
        w.watch = WatchMemory()

    def _signature(self, w: Workload, config: WorkloadConfig) -> tuple[Any, ...]:
        """What the resolution depends on; the access answers' age comes last."""
        return (
            config.watched,
            config.owned,
            config.watch_namespaces,
            config.due_times,
            self._cluster.discovery_generation,
            w.service_account,
            self._cluster.rbac_generation if w.watch.inferred else 0,
            tuple(sorted(w.watch.names.items())),
            self._revisions.get(w.key, 0),
            self._access.epoch(),
        )

    async def prepare(self, w: Workload, config: WorkloadConfig, *, urgent: bool = False) -> None:
        """Resolve kinds, check the ServiceAccount may watch them, and (un)subscribe watches;
        `urgent` (a wake is due) never waits for access answers that only aged."""
        signature = self._signature(w, config)
        if signature == w.watch.signature:
            return
        aged = w.watch.signature is not None and signature[:-1] == w.watch.signature[:-1]
        if aged and (urgent or w.key not in self._answered):
            # Only the access answers aged: they are asked again off the reconcile (behind a
            # backlog of writes that can take seconds), and it looks again once they are in.
            if w.key not in self._asking:
                self._asking.add(w.key)
                self._background(self._ask_again(w, config))
            return
        self._answered.discard(w.key)
        scopes, wanted, warnings = await self._resolve(w, config)
        w.watch.unseen = shared(frozenset(await self._unseen(wanted, warnings)))
        wanted -= w.watch.unseen
        if not scopes[0]:
            warnings.append(
                (
                    "NoKindToWakeOn",
                    "no watched kind can be watched (owned kinds count only through a watched "
                    "kind), so it is never put to sleep",
                )
            )
        w.watch.signature, w.watch.scopes = signature, scopes
        watched = [
            (r, scopes[0][(r.group, r.kind)]) for r in wanted if (r.group, r.kind) in scopes[0]
        ]
        w.watch.namespaces = shared(working_namespaces(watched))
        w.watch.definitions = shared(definitions_of(r for r, _ in watched))
        w.watch.due = self._due_fields(config, [r for r, _ in watched], warnings)
        w.watch.kind_warnings = tuple(warnings)
        self.set_interest(w, w.status)
        self.subscribe(w, wanted)

    def _due_fields(
        self, config: WorkloadConfig, watched: list[APIResource], warnings: list[Notice]
    ) -> Mapping[APIResource, frozenset[tuple[str, ...]]]:
        """The due-time fields it reads, per type among those it watches; one of a kind it does
        not watch is named in a warning and left out (its changes would not be seen)."""
        if not config.due_times:
            return NO_DUE_FIELDS
        found: dict[APIResource, frozenset[tuple[str, ...]]] = {}
        for due in config.due_times:
            resource = self._cluster.discovery.resolve(due.kind)
            if resource is None or resource not in watched:
                warnings.append(
                    (
                        "DueKindNotWatched",
                        f"{DUE_TIMES}: {due.kind.text} is not among the kinds it watches (or "
                        "not served); its due times are ignored",
                    )
                )
                continue
            found[resource] = found.get(resource, frozenset()) | {due.path}
        return compact_mapping(found)

    def due_summary(self, w: Workload, now: datetime, after: datetime) -> DueSummary:
        """Its due times from the shared watches: the latest at or before `now` and the earliest
        after `after`, over the objects in its scope."""
        interest = w.watch.interest
        if interest is None or not w.watch.due:
            return NO_DUE
        return summarize(self._due_times(w, interest), now, after)

    def _due_times(self, w: Workload, interest: Interest) -> Iterable[DueTime]:
        for resource, paths in w.watch.due.items():
            kept = self._hub.kept(resource)
            if kept is None:
                continue
            # Namespaces not listed yet hold nothing here; each reaches it when listed (on_served).
            for obj in kept.in_namespaces(namespaces_to_read(resource, interest)):
                found = due_of(obj)
                if not found or not is_in_interest(obj, resource, interest):
                    continue
                namespace, name = obj.get("namespace") or "", obj.get("name") or ""
                for path, seconds in found:
                    if path in paths:
                        said = object_words(resource.kind, namespace, name, w.namespace)
                        what = f"{said} {'.'.join(path)}"
                        yield DueTime(as_time(seconds), what)

    async def _ask_again(self, w: Workload, config: WorkloadConfig) -> None:
        """Fill the access answers a resolution needs, then ask for another look."""
        try:
            _, wanted, warnings = await self._resolve(w, config, fresh=True)
            await self._unseen(wanted, warnings, fresh=True)
        except KubeError:
            pass  # the reconcile asks again itself, and reports what fails
        finally:
            self._asking.discard(w.key)
            self._answered.add(w.key)
            self._enqueue(w.key)

    async def _resolve(
        self, w: Workload, config: WorkloadConfig, *, fresh: bool = False
    ) -> tuple[Scopes, set[APIResource], list[Notice]]:
        self._granted.pop(w.key, None)
        warnings: list[Notice] = []
        scopes: tuple[dict[GroupKind, Scope], dict[GroupKind, Scope]] = ({}, {})
        wanted: set[APIResource] = set()
        lists = zip((config.watched, config.owned), kind_list_keys(w.annotations), strict=True)
        for (refs, key), target in zip(lists, scopes, strict=True):
            for ref in refs:
                resource = self._served(ref, key, warnings)
                if resource is None:
                    continue
                resolved = await self._resolve_scope(w, ref, resource, config, warnings, fresh)
                if resolved.permitted:
                    target[(resource.group, resource.kind)] = shared(resolved.scope)
                    wanted.add(resource)
        return (compact_mapping(scopes[0]), compact_mapping(scopes[1])), wanted, warnings

    async def _unseen(
        self, wanted: set[APIResource], warnings: list[Notice], *, fresh: bool = False
    ) -> set[APIResource]:
        """The types the controller's own RBAC does not let it watch: a change to them would go
        unseen, so the workload is never put to sleep."""
        unseen = set()
        for resource in sorted(wanted, key=lambda r: r.group_resource):
            if not await self._access.may_watch_everywhere(resource, fresh=fresh):
                unseen.add(resource)
                warnings.append(
                    (
                        "ControllerNotPermitted",
                        f"the controller may not list and watch {resource.group_resource} in "
                        "every namespace (the chart's controller.rbac.watchedResources), so "
                        f"changes to {resource.kind} would not wake it; never put to sleep",
                    )
                )
        return unseen

    def _served(self, ref: KindRef, key: str, warnings: list[Notice]) -> APIResource | None:
        resource = self._cluster.discovery.resolve(ref)
        if resource is None:
            warnings.append(
                (
                    "UnknownKind",
                    f"{key}: {ref} is not served by the API server ({KIND_REF_FORM}); "
                    "retried when API discovery changes",
                )
            )
            return None
        if "watch" not in resource.verbs or "list" not in resource.verbs:
            warnings.append(("UnknownKind", f"{key}: {ref} cannot be listed and watched; ignored"))
            return None
        return resource

    async def _resolve_scope(
        self,
        w: Workload,
        ref: KindRef,
        resource: APIResource,
        config: WorkloadConfig,
        warnings: list[Notice],
        fresh: bool = False,
    ) -> ResolvedScope:
        """Ask the reviews the scope rules need, in their order; warn where watching is denied."""
        names = sorted(w.watch.names.get((resource.group, resource.kind), ()))
        answers: dict[str, bool] = {}
        wanted = config.watch_namespaces
        while isinstance(
            step := resolve_scope(resource.namespaced, w.namespace, wanted, answers), ReviewNeeded
        ):
            answers[step.namespace] = await self._may_watch(
                w, resource, step.namespace, names, fresh
            )
        account = f"{w.namespace}/{w.service_account}"
        for where in step.denied:
            warnings.append(
                (
                    "NotPermitted",
                    f"ServiceAccount {account} may not watch {resource.group_resource} {where}; "
                    f"changes to {ref} there are ignored",
                )
            )
        return step

    async def _may_watch(
        self, w: Workload, resource: APIResource, scope: str, names: list[str], fresh: bool = False
    ) -> bool:
        account = (w.namespace, w.service_account, resource, scope)
        allowed = True
        for name in names or [""]:
            granted, from_rbac = await self._access.answer(*account, name, fresh=fresh)
            if from_rbac:
                asked = self._granted.get(w.key, ())
                self._granted[w.key] = (*asked, (resource, scope, name))
            allowed = allowed and granted
        return allowed

    def revoke(self, workloads: Mapping[WorkloadKey, Workload]) -> list[WorkloadKey]:
        """The workloads RBAC, as it is now, no longer grants something it granted them; their
        next look resolves their kinds and scopes afresh."""
        for key in [k for k in self._revisions if k not in workloads]:
            del self._revisions[key]
        found = []
        for key, questions in list(self._granted.items()):
            w = workloads.get(key)
            if w is None:
                del self._granted[key]
                continue
            ns, account = w.namespace, w.service_account
            if not all(self._access.rbac_grants(ns, account, *q) for q in questions):
                # In the signature, so even a look under way when RBAC changed is not the last.
                self._revisions[key] = self._revisions.get(key, 0) + 1
                found.append(key)
        return found

    def set_interest(self, w: Workload, status: WorkloadStatus) -> None:
        """What wakes it now: its scopes, and since when a listed object counts as news."""
        since = status.asleep_since if status.state == "asleep" else status.last_activity
        interest = Interest(
            watched=w.watch.scopes[0],
            owned=w.watch.scopes[1],
            self_ref=("apps", w.kind, w.namespace, w.name),
            since=since,
            names=w.watch.names,
            namespaces=w.watch.namespaces,
            definitions=w.watch.definitions,
            self_uid=w.obj.uid,
        )
        if interest != w.watch.interest:
            w.watch.interest = interest

    def census(self, w: Workload) -> Census:
        """Per kind whose watch holds its whole collection, what is in the workload's scope now."""
        if w.watch.interest is None:
            return {}
        found: dict[str, KindTally] = {}
        for resource in w.watch.resources:
            kept = self._listed(resource, w.watch.interest)
            if kept is not None:
                found[resource.canonical] = _tally_in(kept, resource, w.watch.interest)
        return found

    def _listed(self, resource: APIResource, interest: Interest) -> Readable | None:
        """The type's watches, if they hold every namespace of the interest's scope listed."""
        kept = self._hub.kept(resource)
        if kept is None or not kept.synced_in(namespaces_to_read(resource, interest)):
            return None
        return kept

    def check_census(self, w: Workload) -> None:
        """Asleep since before we watched: a kind whose objects differ from its census wakes it."""
        if not w.watch.unchecked or w.watch.interest is None or w.status.state != "asleep":
            w.watch.unchecked = NOTHING
            return
        recorded, _ = parse_census(w.annotations.get(CENSUS, ""))
        served = {r.canonical: r for r in w.watch.resources}
        unchecked = set(w.watch.unchecked)
        for kind in w.watch.unchecked:
            resource = served.get(kind)
            if resource is None or kind not in recorded:  # not watched now: nothing to compare
                unchecked.discard(kind)
                continue
            kept = self._listed(resource, w.watch.interest)
            if kept is None:
                continue  # its list is still coming; its sync asks for another look
            unchecked.discard(kind)
            now = _tally_in(kept, resource, w.watch.interest)
            reason = difference(kind, recorded[kind], now)
            # A wake already due names the object that changed: a better reason than a count,
            # and so does an object changed since the sleep, when the list was not replayed.
            if reason is None or w.idle.activity_at is not None:
                continue
            if not self._replay(w, resource, kept, w.watch.interest):
                self._on_activity(w, Activity(resource.kind, "", "", reason), self._clock.now())
        w.watch.unchecked = shared(frozenset(unchecked))

    def subscribe(self, w: Workload, wanted: set[APIResource]) -> None:
        """Hold exactly the watches in `wanted`. What they hold listed already in namespaces it
        did not watch before is read as an initial list at once; what they have yet to list is
        read once listed (`ChangeFeed.on_served`)."""
        for resource in w.watch.resources - wanted:
            self._hub.release(resource, w.key)
        for resource in wanted & w.watch.resources:
            self._read(w, resource, self._hub.set_scope(resource, w.key, _scope_of(w, resource)))
            self._hub.set_due(resource, w.key, w.watch.due.get(resource, frozenset()))
        for resource in wanted - w.watch.resources:
            # Its due fields first, so a watch it starts keeps them from its first list.
            self._hub.set_due(resource, w.key, w.watch.due.get(resource, frozenset()))
            self._read(w, resource, self._hub.acquire(resource, w.key, _scope_of(w, resource)))
        w.watch.resources = shared(frozenset(wanted))

    def _read(self, w: Workload, resource: APIResource, where: Scope) -> None:
        kept = self._hub.kept(resource)
        if kept is not None and (where is None or where):
            self.catch_up(w, resource, kept, where)

    def catch_up(
        self, w: Workload, resource: APIResource, store: Readable, where: Scope = None
    ) -> None:
        """What `w` missed of `resource`, read from a store it was not told of object by object:
        listed before it joined, or a first list (which tells no one). An asleep one: what
        changed while nobody watched. An awake one: what changed after its idle clock last
        restarted (a first list that came after the workload was first managed holds the
        changes made in between); the API server times changes to the second, so one made in
        the second the clock restarted is taken as made before it. Only the namespaces in
        `where` (None: all) are read."""
        interest = w.watch.interest
        if interest is None:
            return
        if w.status.state != "asleep":
            interest = replace(interest, since=w.idle.last_activity)
        elif resource.canonical in w.watch.unchecked:
            # Its census, compared next (`check_census`), moves with every change the replay
            # would find: the replay waits for a difference, to name the object.
            return
        self._replay(w, resource, store, interest, where)

    def _replay(
        self,
        w: Workload,
        resource: APIResource,
        store: Readable,
        interest: Interest,
        where: Scope = None,
    ) -> bool:
        """A warm watch's store, seen as an initial list by a workload that joins it late;
        whether it found activity. Where its scope alone decides, only each namespace's newest
        object can be news, worked out once for every workload that shares the namespace."""
        for obj in _candidates(store, resource, interest, where):
            found = find_activity(Change("ADDED", obj, initial=True), resource, interest)
            if found is not None:
                self._on_activity(w, found, self._clock.now())
                return True
        return False


def _candidates(
    store: Readable, resource: APIResource, interest: Interest, where: Scope = None
) -> list[Mapping[str, Any]]:
    """The stored objects in `where` (None: all) that may be news to `interest` as an initial
    list would be."""
    alone, scope = scope_alone(resource, interest)
    if not alone:
        return list(store.in_namespaces(_within(namespaces_to_read(resource, interest), where)))
    since = interest.since
    if since is None:  # nothing listed is news without a time to be newer than
        return []
    scope = _within(scope, where)
    namespaces = list(store.namespaces()) if scope is None else scope
    newest = (store.summary(n, _NEWEST, newest_object) for n in namespaces)
    return [found[1] for found in newest if found is not None and found[0] > since]


def _within(scope: Scope, where: Scope) -> Scope:
    """The namespaces in both (None: all)."""
    if scope is None:
        return where
    return scope if where is None else scope & where


def _tally_in(store: Readable, resource: APIResource, interest: Interest) -> KindTally:
    """The census of one type, reading only the namespaces the interest covers; where its scope
    alone decides, each namespace's tally is worked out once for every workload that reads it."""
    alone, scope = scope_alone(resource, interest)
    if not alone:
        where = namespaces_to_read(resource, interest)
        return tally(store.in_namespaces(where), resource, interest)
    namespaces = list(store.namespaces()) if scope is None else scope
    work_out = functools.partial(plain_tally, resource=resource)
    return combined(store.summary(n, _TALLY, work_out) for n in namespaces)


# The names under which a store keeps what it worked out of a namespace's objects.
_NEWEST, _TALLY = "newest", "tally"


def _scope_of(w: Workload, resource: APIResource) -> Scope:
    """Where a change to `resource` can be activity for `w`: as `is_in_interest` reads scopes."""
    watched, owned = w.watch.scopes
    group_kind = (resource.group, resource.kind)
    if group_kind in watched:
        return watched[group_kind]
    return owned.get(group_kind)  # neither (not expected): None, every namespace
