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
from zeroscaler.controller.idle_memory import IdleReading
from zeroscaler.controller.watch_memory import Scopes, WatchMemory
from zeroscaler.controller.workload import WorkloadKey
from zeroscaler.controller.workload_object import WorkloadObject
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

# Activity found for the workload of a key; the one place that notes it (`noting.py`) is behind it.
OnActivity = Callable[[WorkloadKey, Activity, datetime], None]
NO_DUE_FIELDS: Mapping[APIResource, frozenset[tuple[str, ...]]] = {}


class Subscriptions:
    """Resolves kinds and scopes for a workload and (un)subscribes its shared watches.

    Each call is handed the workload's watch memory (its own: `watch_memory.py`) and what it
    reads besides, as values: the key, the object, the status; a replay reads the idle clock
    (`IdleReading`) but activity it finds is noted by its owner, through `on_activity`."""

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

    def recall_census(self, watch: WatchMemory, obj: WorkloadObject) -> None:
        """Asleep before we watched: the kinds of the census its sleep recorded are compared
        once their watches have listed (`check_census`)."""
        watch.unchecked = shared(frozenset(parse_census(obj.annotations.get(CENSUS, ""))[0]))

    def forget(self, key: WorkloadKey, watch: WatchMemory) -> None:
        """No longer managed: no watch held, and its kinds resolved afresh if it is again."""
        self.release_all(key, watch)
        watch.clear()

    def release_all(self, key: WorkloadKey, watch: WatchMemory) -> None:
        """Hold no watch for it (`subscribe` to nothing)."""
        for resource in watch.resources:
            self._hub.release(resource, key)
        watch.resources = shared(frozenset())

    def _signature(
        self, key: WorkloadKey, obj: WorkloadObject, watch: WatchMemory, config: WorkloadConfig
    ) -> tuple[Any, ...]:
        """What the resolution depends on; the access answers' age comes last."""
        return (
            config.watched,
            config.owned,
            config.watch_namespaces,
            config.due_times,
            self._cluster.discovery_generation,
            obj.service_account,
            self._cluster.rbac_generation if watch.inferred else 0,
            tuple(sorted(watch.names.items())),
            self._revisions.get(key, 0),
            self._access.epoch(),
        )

    async def prepare(
        self,
        key: WorkloadKey,
        obj: WorkloadObject,
        watch: WatchMemory,
        idle: IdleReading,
        status: WorkloadStatus,
        config: WorkloadConfig,
        *,
        urgent: bool = False,
    ) -> None:
        """Resolve kinds, check the ServiceAccount may watch them, and (un)subscribe watches;
        `urgent` (a wake is due) never waits for access answers that only aged. `status` and
        the idle clock decide what a watch it joins late has to tell (`catch_up`)."""
        signature = self._signature(key, obj, watch, config)
        if signature == watch.signature:
            return
        aged = watch.signature is not None and signature[:-1] == watch.signature[:-1]
        if aged and (urgent or key not in self._answered):
            # Only the access answers aged: they are asked again off the reconcile (behind a
            # backlog of writes that can take seconds), and it looks again once they are in.
            if key not in self._asking:
                self._asking.add(key)
                self._background(self._ask_again(key, obj, watch, config))
            return
        self._answered.discard(key)
        scopes, wanted, warnings = await self._resolve(key, obj, watch, config)
        watch.unseen = shared(frozenset(await self._unseen(wanted, warnings)))
        wanted -= watch.unseen
        if not scopes[0]:
            warnings.append(
                (
                    "NoKindToWakeOn",
                    "no watched kind can be watched (owned kinds count only through a watched "
                    "kind), so it is never put to sleep",
                )
            )
        watch.signature, watch.scopes = signature, scopes
        watched = [
            (r, scopes[0][(r.group, r.kind)]) for r in wanted if (r.group, r.kind) in scopes[0]
        ]
        watch.namespaces = shared(working_namespaces(watched))
        watch.definitions = shared(definitions_of(r for r, _ in watched))
        watch.due = self._due_fields(config, [r for r, _ in watched], warnings)
        watch.kind_warnings = tuple(warnings)
        self.set_interest(key, obj, watch, status)
        self.subscribe(key, watch, idle, status, wanted)

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

    def due_summary(
        self, watch: WatchMemory, namespace: str, now: datetime, after: datetime
    ) -> DueSummary:
        """Its due times from the shared watches: the latest at or before `now` and the earliest
        after `after`, over the objects in its scope."""
        interest = watch.interest
        if interest is None or not watch.due:
            return NO_DUE
        return summarize(self._due_times(watch, namespace, interest), now, after)

    def _due_times(
        self, watch: WatchMemory, workload_namespace: str, interest: Interest
    ) -> Iterable[DueTime]:
        for resource, paths in watch.due.items():
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
                        said = object_words(resource.kind, namespace, name, workload_namespace)
                        what = f"{said} {'.'.join(path)}"
                        yield DueTime(as_time(seconds), what)

    async def _ask_again(
        self, key: WorkloadKey, obj: WorkloadObject, watch: WatchMemory, config: WorkloadConfig
    ) -> None:
        """Fill the access answers a resolution needs, then ask for another look."""
        try:
            _, wanted, warnings = await self._resolve(key, obj, watch, config, fresh=True)
            await self._unseen(wanted, warnings, fresh=True)
        except KubeError:
            pass  # the reconcile asks again itself, and reports what fails
        finally:
            self._asking.discard(key)
            self._answered.add(key)
            self._enqueue(key)

    async def _resolve(
        self,
        key: WorkloadKey,
        obj: WorkloadObject,
        watch: WatchMemory,
        config: WorkloadConfig,
        *,
        fresh: bool = False,
    ) -> tuple[Scopes, set[APIResource], list[Notice]]:
        self._granted.pop(key, None)
        warnings: list[Notice] = []
        scopes: tuple[dict[GroupKind, Scope], dict[GroupKind, Scope]] = ({}, {})
        wanted: set[APIResource] = set()
        lists = zip((config.watched, config.owned), kind_list_keys(obj.annotations), strict=True)
        account = (key, obj.service_account)
        for (refs, annotation), target in zip(lists, scopes, strict=True):
            for ref in refs:
                resource = self._served(ref, annotation, warnings)
                if resource is None:
                    continue
                names = sorted(watch.names.get((resource.group, resource.kind), ()))
                resolved = await self._resolve_scope(
                    account, names, ref, resource, config, warnings, fresh
                )
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
        account: tuple[WorkloadKey, str],
        names: list[str],
        ref: KindRef,
        resource: APIResource,
        config: WorkloadConfig,
        warnings: list[Notice],
        fresh: bool = False,
    ) -> ResolvedScope:
        """Ask the reviews the scope rules need, in their order; warn where watching is denied."""
        key, service_account = account
        answers: dict[str, bool] = {}
        wanted = config.watch_namespaces
        while isinstance(
            step := resolve_scope(resource.namespaced, key[1], wanted, answers), ReviewNeeded
        ):
            answers[step.namespace] = await self._may_watch(
                account, resource, step.namespace, names, fresh
            )
        said = f"{key[1]}/{service_account}"
        for where in step.denied:
            warnings.append(
                (
                    "NotPermitted",
                    f"ServiceAccount {said} may not watch {resource.group_resource} {where}; "
                    f"changes to {ref} there are ignored",
                )
            )
        return step

    async def _may_watch(
        self,
        account: tuple[WorkloadKey, str],
        resource: APIResource,
        scope: str,
        names: list[str],
        fresh: bool = False,
    ) -> bool:
        key, service_account = account
        asking = (key[1], service_account, resource, scope)
        allowed = True
        for name in names or [""]:
            granted, from_rbac = await self._access.answer(*asking, name, fresh=fresh)
            if from_rbac:
                asked = self._granted.get(key, ())
                self._granted[key] = (*asked, (resource, scope, name))
            allowed = allowed and granted
        return allowed

    def revoke(
        self, object_of: Callable[[WorkloadKey], WorkloadObject | None]
    ) -> list[WorkloadKey]:
        """The workloads RBAC, as it is now, no longer grants something it granted them; their
        next look resolves their kinds and scopes afresh. `object_of` reads a workload's object
        (None: no such workload)."""
        for key in [k for k in self._revisions if object_of(k) is None]:
            del self._revisions[key]
        found = []
        for key, questions in list(self._granted.items()):
            obj = object_of(key)
            if obj is None:
                del self._granted[key]
                continue
            ns, account = key[1], obj.service_account
            if not all(self._access.rbac_grants(ns, account, *q) for q in questions):
                # In the signature, so even a look under way when RBAC changed is not the last.
                self._revisions[key] = self._revisions.get(key, 0) + 1
                found.append(key)
        return found

    def set_interest(
        self, key: WorkloadKey, obj: WorkloadObject, watch: WatchMemory, status: WorkloadStatus
    ) -> None:
        """What wakes it now: its scopes, and since when a listed object counts as news."""
        since = status.asleep_since if status.state == "asleep" else status.last_activity
        interest = Interest(
            watched=watch.scopes[0],
            owned=watch.scopes[1],
            self_ref=("apps", *key),
            since=since,
            names=watch.names,
            namespaces=watch.namespaces,
            definitions=watch.definitions,
            self_uid=obj.uid,
        )
        if interest != watch.interest:
            watch.interest = interest

    def census(self, watch: WatchMemory) -> Census:
        """Per kind whose watch holds its whole collection, what is in the workload's scope now."""
        if watch.interest is None:
            return {}
        found: dict[str, KindTally] = {}
        for resource in watch.resources:
            kept = self._listed(resource, watch.interest)
            if kept is not None:
                found[resource.canonical] = _tally_in(kept, resource, watch.interest)
        return found

    def _listed(self, resource: APIResource, interest: Interest) -> Readable | None:
        """The type's watches, if they hold every namespace of the interest's scope listed."""
        kept = self._hub.kept(resource)
        if kept is None or not kept.synced_in(namespaces_to_read(resource, interest)):
            return None
        return kept

    def check_census(
        self,
        key: WorkloadKey,
        obj: WorkloadObject,
        watch: WatchMemory,
        idle: IdleReading,
        status: WorkloadStatus,
    ) -> None:
        """Asleep since before we watched: a kind whose objects differ from its census wakes it."""
        if not watch.unchecked or watch.interest is None or status.state != "asleep":
            watch.unchecked = NOTHING
            return
        recorded, _ = parse_census(obj.annotations.get(CENSUS, ""))
        served = {r.canonical: r for r in watch.resources}
        unchecked = set(watch.unchecked)
        for kind in watch.unchecked:
            resource = served.get(kind)
            if resource is None or kind not in recorded:  # not watched now: nothing to compare
                unchecked.discard(kind)
                continue
            kept = self._listed(resource, watch.interest)
            if kept is None:
                continue  # its list is still coming; its sync asks for another look
            unchecked.discard(kind)
            now = _tally_in(kept, resource, watch.interest)
            reason = difference(kind, recorded[kind], now)
            # A wake already due names the object that changed: a better reason than a count,
            # and so does an object changed since the sleep, when the list was not replayed.
            if reason is None or idle.activity_at is not None:
                continue
            if not self._replay(key, resource, kept, watch.interest):
                self._on_activity(key, Activity(resource.kind, "", "", reason), self._clock.now())
        watch.unchecked = shared(frozenset(unchecked))

    def subscribe(
        self,
        key: WorkloadKey,
        watch: WatchMemory,
        idle: IdleReading,
        status: WorkloadStatus,
        wanted: set[APIResource],
    ) -> None:
        """Hold exactly the watches in `wanted`. What they hold listed already in namespaces it
        did not watch before is read as an initial list at once; what they have yet to list is
        read once listed (`ChangeFeed.on_served`)."""
        for resource in watch.resources - wanted:
            self._hub.release(resource, key)
        for resource in wanted & watch.resources:
            where = self._hub.set_scope(resource, key, _scope_of(watch, resource))
            self._read(key, watch, idle, status, resource, where)
            self._hub.set_due(resource, key, watch.due.get(resource, frozenset()))
        for resource in wanted - watch.resources:
            # Its due fields first, so a watch it starts keeps them from its first list.
            self._hub.set_due(resource, key, watch.due.get(resource, frozenset()))
            where = self._hub.acquire(resource, key, _scope_of(watch, resource))
            self._read(key, watch, idle, status, resource, where)
        watch.resources = shared(frozenset(wanted))

    def _read(
        self,
        key: WorkloadKey,
        watch: WatchMemory,
        idle: IdleReading,
        status: WorkloadStatus,
        resource: APIResource,
        where: Scope,
    ) -> None:
        kept = self._hub.kept(resource)
        if kept is not None and (where is None or where):
            self.catch_up(key, watch, idle, status, resource, kept, where)

    def catch_up(
        self,
        key: WorkloadKey,
        watch: WatchMemory,
        idle: IdleReading,
        status: WorkloadStatus,
        resource: APIResource,
        store: Readable,
        where: Scope = None,
    ) -> None:
        """What the workload missed of `resource`, read from a store it was not told of object
        by object: listed before it joined, or a first list (which tells no one). An asleep
        one: what changed while nobody watched. An awake one: what changed after its idle clock
        last restarted (a first list that came after the workload was first managed holds the
        changes made in between); the API server times changes to the second, so one made in
        the second the clock restarted is taken as made before it. Only the namespaces in
        `where` (None: all) are read."""
        interest = watch.interest
        if interest is None:
            return
        if status.state != "asleep":
            interest = replace(interest, since=idle.last_activity)
        elif resource.canonical in watch.unchecked:
            # Its census, compared next (`check_census`), moves with every change the replay
            # would find: the replay waits for a difference, to name the object.
            return
        self._replay(key, resource, store, interest, where)

    def _replay(
        self,
        key: WorkloadKey,
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
                self._on_activity(key, found, self._clock.now())
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


def _scope_of(watch: WatchMemory, resource: APIResource) -> Scope:
    """Where a change to `resource` can be activity for the workload: as `is_in_interest` reads
    scopes."""
    watched, owned = watch.scopes
    group_kind = (resource.group, resource.kind)
    if group_kind in watched:
        return watched[group_kind]
    return owned.get(group_kind)  # neither (not expected): None, every namespace
