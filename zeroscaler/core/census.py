"""What a sleep remembers of the objects in a workload's scope, so a restart sees what it missed.

Created and updated objects show it in their managedFields times, deleted ones leave nothing behind.
At sleep the controller records, per kind, how many objects were in scope and an order-independent
digest of them (one annotation, no write per object); the first list after a restart is compared.
The digest moves only with changes that count as activity, so a status-only update or one of our own
writes never wakes anyone, and a change in the very second of the sleep does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zeroscaler.core.activity import (
    MANAGER,
    Interest,
    Meta,
    MetadataOnly,
    Scope,
    Times,
    Writer,
    is_in_interest,
    kept_writes,
    newest_change_time,
    rarer_fields,
    scope_alone,
    writes,
)
from zeroscaler.core.annotations import CENSUS, PREFIX, Problem
from zeroscaler.core.kinds import APIResource

CENSUS_FORM = "comma-separated Kind.group=count:16 hex digits (written by the controller)"
_MODULUS = 1 << 64
# One encoder for every digest (json.dumps with options makes a new one per call); its text is
# part of every census annotation written, so it must not change.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
_quote = json.encoder.encode_basestring_ascii  # a string as the encoder writes it
# The kinds we scale ourselves: our scale writes move their generation, so it is left out for them.
_SCALED = frozenset({("apps", "Deployment"), ("apps", "StatefulSet")})


@dataclass(frozen=True, slots=True)
class KindTally:
    """How many objects of one kind were in scope, and a digest of them."""

    count: int = 0
    digest: int = 0

    def __str__(self) -> str:
        return f"{self.count}:{self.digest:016x}"


Census = Mapping[str, KindTally]  # by kind, in the `Kind.group` form


def fingerprint(meta: Meta, resource: APIResource) -> int:
    """A 64-bit hash of what, changed, would be activity: status and our own writes left out."""
    return _hash(_fingerprint_text(meta, resource, _is_scaled(resource)))


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _is_scaled(resource: APIResource) -> bool:
    return (resource.group, resource.kind) in _SCALED


def _fingerprint_text(meta: Meta, resource: APIResource, scaled: bool) -> str:
    """The text hashed: the parts below as `digest_text` writes them (no copies of them are made:
    a restart hashes every object in every sleeper's scope, 200,000 in the scale row)."""
    if type(meta) is MetadataOnly and resource.has_status:
        plain = meta.plain()
        if plain is not None:  # most stored objects: their few slots read directly
            return _plain_text(plain, scaled)
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    if not resource.has_status:  # every update counts
        return digest_text([namespace, name, str(meta.get("resourceVersion") or "")])
    others = _writes_by_others(meta)
    generation = [] if scaled else [meta.get("generation") or 0]
    rarer = rarer_fields(meta)
    if not rarer and type(namespace) is str and type(name) is str:
        # Most stored objects: the text of their five empty parts is always the same.
        tail = "".join(["," + _part_text(g) for g in generation])
        return f"[{_quote(namespace)},{_quote(name)},{_NO_RARER},{_part_text(others)}{tail}]"
    annotations = rarer.get("annotations")
    if annotations:
        annotations = {k: v for k, v in annotations.items() if not k.startswith(PREFIX)}
    parts: list[Any] = [
        namespace,
        name,
        rarer.get("labels") or _EMPTY,
        annotations or _EMPTY,
        rarer.get("finalizers") or (),
        rarer.get("ownerReferences") or (),
        rarer.get("deletionTimestamp") or "",
        others,
        *generation,
    ]
    return digest_text(parts)


def _plain_text(plain: tuple[str, str, int, tuple[Writer, ...], Times], scaled: bool) -> str:
    """The text of a stored object without the rarer fields, as the shorter path above writes
    it, from the object's slots (`MetadataOnly.plain`)."""
    namespace, name, generation, writers, times = plain
    others = _others_text(writers, times) if writers else "[]"
    tail = "" if scaled else "," + _part_text(generation or 0)
    return f"[{_quote(namespace)},{_quote(name)},{_NO_RARER},{others}{tail}]"


_EMPTY: Mapping[str, str] = {}
# The text of a stored object's writes by others, by its writers and their times: objects
# written by the same managers in the same second share it.
_OTHERS: dict[tuple[tuple[Writer, ...], Times], str] = {}


def _others_text(writers: tuple[Writer, ...], times: Times) -> str:
    key = (writers, times)
    text = _OTHERS.get(key)
    if text is None:
        if len(_OTHERS) >= 4096:  # a bound, not a policy: the next objects fill it again
            _OTHERS.clear()
        text = _OTHERS[key] = _part_text(_by_others(kept_writes(writers, times)))
    return text


def digest_text(parts: list[Any]) -> str:
    """`parts` as the encoder writes them, part by part (a list's text is its items' texts)."""
    return "[" + ",".join(map(_part_text, parts)) + "]"


def _part_text(part: Any) -> str:
    """One part as the encoder writes it; the common shapes (strings, ints, maps of strings,
    lists of strings or of string tuples) are written directly, several times as fast, and
    anything else by the encoder itself."""
    kind = type(part)
    if kind is str:
        return _quote(part)
    if kind is int:
        return str(part)
    if kind is dict or (kind is not list and kind is not tuple and isinstance(part, Mapping)):
        pairs = []
        for key, value in sorted(part.items()):
            if type(key) is not str or type(value) is not str:
                return _ENCODER.encode(dict(part))
            pairs.append(f"{_quote(key)}:{_quote(value)}")
        return "{" + ",".join(pairs) + "}"
    if kind is list or kind is tuple:
        items = []
        for item in part:
            if type(item) is str:
                items.append(_quote(item))
            elif type(item) is tuple:
                try:
                    items.append("[" + ",".join(map(_quote, item)) + "]")
                except TypeError:  # an item of the tuple is not a string
                    return _ENCODER.encode(part)
            else:
                return _ENCODER.encode(part)
        return "[" + ",".join(items) + "]"
    return _ENCODER.encode(part)


# The text of the five parts of an object without labels, annotations, finalizers, owners and
# deletion time, as `_part_text` writes them.
_NO_RARER = ",".join(map(_part_text, [_EMPTY, _EMPTY, (), (), ""]))


def namespaces_to_read(resource: APIResource, interest: Interest) -> Scope:
    """The namespaces whose objects of `resource` can be in the workload's scope (None: all), so
    a census reads those alone rather than the whole type: `is_in_interest` narrows no further."""
    if not resource.namespaced:
        return None  # no namespace to narrow by
    group_kind = (resource.group, resource.kind)
    if group_kind in interest.watched:
        return interest.watched[group_kind]
    if group_kind in interest.owned:
        return interest.owned[group_kind]
    return frozenset()  # neither watched nor owned: nothing of it counts


def tally(
    objects: Iterable[Mapping[str, Any]], resource: APIResource, interest: Interest
) -> KindTally:
    """Count and digest the objects of one type that are in the workload's scope."""
    count, digest = 0, 0
    alone, scope = scope_alone(resource, interest)
    scaled = _is_scaled(resource)
    for obj in objects:
        meta: Meta = obj if type(obj) is MetadataOnly else (obj.get("metadata") or {})
        if alone:  # the namespace alone decides
            if scope is not None and str(meta.get("namespace") or "") not in scope:
                continue
        elif not is_in_interest(meta, resource, interest):
            continue
        count += 1
        digest += _hash(_fingerprint_text(meta, resource, scaled))  # reduced once, at the end
    return KindTally(count, digest % _MODULUS)


def plain_tally(objects: Iterable[Mapping[str, Any]], resource: APIResource) -> KindTally:
    """`tally` of every object given, for an interest whose scope alone decides (`scope_alone`):
    a namespace's, worked out once for every workload that reads it."""
    count, digest = 0, 0
    scaled = _is_scaled(resource)
    for obj in objects:
        meta: Meta = obj if type(obj) is MetadataOnly else (obj.get("metadata") or {})
        count += 1
        digest += _hash(_fingerprint_text(meta, resource, scaled))
    return KindTally(count, digest % _MODULUS)


def combined(tallies: Iterable[KindTally]) -> KindTally:
    """The tally of several namespaces' objects together: counts and digests add up."""
    count, digest = 0, 0
    for part in tallies:
        count += part.count
        digest += part.digest
    return KindTally(count, digest % _MODULUS)


def newest_object(
    objects: Iterable[Mapping[str, Any]],
) -> tuple[datetime, Mapping[str, Any]] | None:
    """The object changed last by someone other than zeroscaler, and when (`newest_change_time`):
    an initial list holds news for a workload whose scope alone decides exactly when this is
    after its `since`."""
    found: tuple[datetime, Mapping[str, Any]] | None = None
    for obj in objects:
        when = newest_change_time(obj.get("metadata") or {})
        if when is not None and (found is None or when > found[0]):
            found = (when, obj)
    return found


def difference(kind: str, before: KindTally, after: KindTally) -> str | None:
    """What changed while nobody watched, in an Event's words; None when the tallies agree."""
    if before == after:
        return None
    counts = f"{before.count} in scope at sleep, {after.count} now"
    if after.count < before.count:
        gone = before.count - after.count
        what = f"{gone} {kind} {'object' if gone == 1 else 'objects'}"
        return f"{what} deleted while zeroscaler was not watching ({counts})"
    return f"{kind} objects changed while zeroscaler was not watching ({counts})"


def format_census(census: Census) -> str:
    """The annotation value, kinds in name order."""
    return ", ".join(f"{kind}={census[kind]}" for kind in sorted(census))


def parse_census(text: str) -> tuple[dict[str, KindTally], list[Problem]]:
    """The annotation read back; malformed entries are left out and reported."""
    census: dict[str, KindTally] = {}
    problems: list[Problem] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, _, value = item.partition("=")
        count, _, digest = value.partition(":")
        try:
            tally_ = KindTally(int(count), int(digest, 16))
        except ValueError:
            tally_ = None
        if not kind or tally_ is None or len(digest) != 16 or tally_.count < 0:
            problems.append(Problem(CENSUS, f"{item[:60]!r} is not of the form {CENSUS_FORM}"))
            continue
        census[kind] = tally_
    return census, problems


def _writes_by_others(meta: Meta) -> list[tuple[str, str, str]]:
    """managedFields entries (manager, operation, time) of writes that were not status-only,
    in order."""
    return _by_others(writes(meta))


def _by_others(entries: Iterable[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    found = [(m, op, t) for m, op, sub, t in entries if m != MANAGER and sub != "status"]
    found.sort()
    return found
