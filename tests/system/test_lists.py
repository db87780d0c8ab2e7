"""Lists in pages from the real API server: every object once and in order, each next page sent
before the page before it is decoded."""

from __future__ import annotations

from pathlib import Path

from zeroscaler.api import Kube, Obj
from zeroscaler.api.credentials import load_access


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


async def test_a_list_in_pages_holds_every_object_once_each_page_asked_for_ahead(
    kubeconfig: Path, ns: str
) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    async with Kube(load_access(str(kubeconfig))) as kube:
        for i in range(21):
            await kube.create(path, {"metadata": {"name": f"cm-{i:02d}"}, "data": {"i": str(i)}})
        whole, _ = await kube.list_all(path)
        assert kube.pages_ahead == 0  # one page: nothing to ask for ahead
        paged, version = await kube.list_all(path, page_size=4)
        names = [_name(o) for o in paged]
        # With the namespace's root CA map, 22 maps: six pages, five of them asked for ahead.
        assert names == [_name(o) for o in whole]
        assert len(set(names)) == 22
        assert kube.pages_ahead == 5
        assert version.isdigit()
        kept, _ = await kube.list_all(
            path, page_size=4, metadata_only=True, transform=lambda o: {"name": _name(o)}
        )
        assert [k["name"] for k in kept] == names
        assert kube.pages_ahead == 10
