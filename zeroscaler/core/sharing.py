"""One shared copy of the small immutable values that thousands of workloads hold alike.

At 10,000 workloads most of what each one keeps is the same as its neighbours': the namespaces it
watches in, the kinds, the annotation keys. A set or dict of one item costs over 200 bytes, so
each workload keeping its own copies cost more than the rest of its record.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterator, Mapping
from typing import Any, TypeVar

H = TypeVar("H", bound=Hashable)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)

_LIMIT = 100_000  # distinct values kept before the table starts afresh (churn must not leak)
_values: dict[Any, Any] = {}
_EMPTY: Mapping[Any, Any] = {}
NOTHING: frozenset[Any] = frozenset()  # `frozenset()` makes a new 216-byte object each time


def shared(value: H) -> H:
    """The one kept copy of an immutable value equal to `value`."""
    found = _values.get(value)
    if found is not None:
        return found  # type: ignore[no-any-return]
    if len(_values) >= _LIMIT:  # sharing is lost for values held now, nothing else
        _values.clear()
    _values[value] = value
    return value


def shared_mapping(mapping: Mapping[K, V]) -> Mapping[K, V]:
    """One copy of a mapping that is never changed after it is made, keyed by its items."""
    if not mapping:
        return _EMPTY
    items = frozenset(mapping.items())
    return shared(_Frozen(items, mapping)).mapping


def compact_mapping(mapping: Mapping[K, V]) -> Mapping[K, V]:
    """A mapping never changed after it is made, in as few bytes as its size allows: most
    workloads watch one kind and own none."""
    if not mapping:
        return _EMPTY
    if len(mapping) == 1:
        ((key, value),) = mapping.items()
        return _One(key, value)
    return mapping


class _One(Mapping[K, V]):
    """A mapping of one item: 56 bytes, where a dict of one is 216."""

    __slots__ = ("_key", "_value")

    def __init__(self, key: K, value: V) -> None:
        self._key, self._value = key, value

    def __getitem__(self, key: K) -> V:
        if key == self._key:
            return self._value
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key == self._key

    def __iter__(self) -> Iterator[K]:
        yield self._key

    def __len__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return f"{{{self._key!r}: {self._value!r}}}"


class _Frozen:
    """A mapping's items as a key of the table, holding the mapping that stands for them."""

    __slots__ = ("items", "mapping")

    def __init__(self, items: frozenset[Any], mapping: Mapping[Any, Any]) -> None:
        self.items, self.mapping = items, mapping

    def __hash__(self) -> int:
        return hash(self.items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Frozen) and other.items == self.items


def shared_strings(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an object's annotations or labels whose strings are interned: every workload
    has the same keys, and most of the same values (kinds, timeouts, states)."""
    return {sys.intern(k): sys.intern(v) if isinstance(v, str) else v for k, v in mapping.items()}
