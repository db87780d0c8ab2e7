"""The one-process benchmark's faked API: what it serves is what the API server would."""

from __future__ import annotations

import json

import pytest

from bench.bench_memory import _api_object, api_object_text


@pytest.mark.parametrize(("t", "k", "i"), [(0, 0, 0), (7, 19, 12_345), (49, 199, 39_999)])
def test_the_faked_api_writes_an_object_as_json_encodes_it(t: int, k: int, i: int) -> None:
    assert api_object_text(t, k, i) == json.dumps(_api_object(t, k, i), separators=(",", ":"))
