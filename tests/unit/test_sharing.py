"""The shared and compact values that keep a workload's record small."""

from __future__ import annotations

import sys

import pytest

from zeroscaler.core.sharing import (
    compact_mapping,
    shared,
    shared_mapping,
    shared_strings,
)


def test_equal_values_are_one_object() -> None:
    first = shared(frozenset({"team-a", "team-b"}))
    second = shared(frozenset({"team-b", "team-a"}))
    assert second is first
    assert shared(frozenset({"team-c"})) is not first


def test_equal_mappings_are_one_object_and_empty_ones_share_one() -> None:
    first = shared_mapping({"observedGeneration": 2})
    assert shared_mapping({"observedGeneration": 2}) is first
    assert shared_mapping({"observedGeneration": 3}) == {"observedGeneration": 3}
    assert shared_mapping({}) is shared_mapping({})


@pytest.mark.parametrize(
    "mapping",
    [
        {},
        {("example.com", "Backup"): frozenset({"ops"})},
        {("", "ConfigMap"): None, ("a", "B"): None},
    ],
)
def test_a_compact_mapping_reads_as_the_dict_it_stands_for(mapping: dict[object, object]) -> None:
    compact = compact_mapping(mapping)
    assert compact == mapping
    assert dict(compact) == mapping
    assert len(compact) == len(mapping)
    for key, value in mapping.items():
        assert key in compact
        assert compact[key] == value
        assert compact.get(key, "absent") == value
    assert ("other", "Kind") not in compact
    assert compact.get(("other", "Kind")) is None
    with pytest.raises(KeyError):
        compact[("other", "Kind")]


def test_a_mapping_of_one_is_smaller_than_a_dict_of_one() -> None:
    one = {("example.com", "Backup"): frozenset({"ops"})}
    assert sys.getsizeof(compact_mapping(one)) < sys.getsizeof(one) / 2


def test_annotation_strings_are_interned() -> None:
    value = "".join(["Backup.", "example.com"])  # made at run time: not interned yet
    first = shared_strings({"zeroscaler.io/watched-kinds": value})
    second = shared_strings({"zeroscaler.io/watched-kinds": "Backup.example.com"})
    assert first == second
    assert first["zeroscaler.io/watched-kinds"] is second["zeroscaler.io/watched-kinds"]
