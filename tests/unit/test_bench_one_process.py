"""The one-process benchmark's faked API: what it serves is what the API server would."""

from __future__ import annotations

import json

import httpx
import pytest

from bench.workloads import api_object, api_object_text


@pytest.mark.parametrize(("t", "k", "i"), [(0, 0, 0), (7, 19, 12_345), (49, 199, 39_999)])
def test_the_faked_api_writes_an_object_as_json_encodes_it(t: int, k: int, i: int) -> None:
    assert api_object_text(t, k, i) == json.dumps(api_object(t, k, i), separators=(",", ":"))


async def test_each_namespace_lists_what_the_whole_type_holds_there() -> None:
    from bench.one_process import LoadedAPI
    from bench.workloads import GROUP, kind_of

    api = LoadedAPI(1_000, 20_000)  # 400 objects a type over 20 namespaces
    plural = kind_of(3)[1]

    async def names(path: str) -> list[tuple[str, str]]:
        resp = await api(httpx.Request("GET", f"https://127.0.0.1:1{path}"))
        items = json.loads(resp.content)["items"]
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items]

    whole = await names(f"/apis/{GROUP}/v1/{plural}")
    spaced = [await names(f"/apis/{GROUP}/v1/namespaces/zs-bench-{k}/{plural}") for k in range(20)]
    assert len(whole) == 400
    assert sorted(o for found in spaced for o in found) == sorted(whole)
    assert all(ns == f"zs-bench-{k}" for k, found in enumerate(spaced) for ns, _ in found)
