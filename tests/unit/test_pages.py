"""Lists in pages: the next page is asked for from a page's first bytes, and the decoded page has
the last word on what comes next."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.unit.mock_api import kube_served_by
from zeroscaler.api import Gone
from zeroscaler.api.lists import continue_token


def page(names: list[str], token: str = "", head: str = "") -> bytes:
    """A list page as the API server writes it: its metadata before its items."""
    meta: dict[str, Any] = {"resourceVersion": "7", **({"continue": token} if token else {})}
    items = [{"metadata": {"name": n, "namespace": "ops"}} for n in names]
    body = {"kind": "ConfigMapList", "metadata": meta, "items": items}
    text = json.dumps(body, separators=(",", ":"))
    return (head + text).encode() if head else text.encode()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (page(["a"], "eyJydiI6N30"), "eyJydiI6N30"),
        (page(["a"]), ""),  # the last page
        (b'{"metadata": {"continue": "eyJ9"}, "items": []}', "eyJ9"),
        (b'{"metadata":{"continue":""},"items":[]}', ""),
        # A "continue" among the items is an object's, not the list's.
        (b'{"metadata":{},"items":[{"data":{"continue":"x"}}]}', ""),
        (b'{"metadata":{"resourceVersion":"7"' + b" " * 5000 + b',"continue":"late"}}', ""),
    ],
    ids=["a token", "none", "spaced", "empty", "inside the items", "beyond the first bytes"],
)
def test_the_continue_token_is_read_from_the_metadata_before_the_items(
    body: bytes, expected: str
) -> None:
    assert continue_token(body) == expected


class Pages:
    """Five pages of two names, `a0`..`e1`; records the continue token of each request."""

    def __init__(self, misleading: bool = False, gone_at: str = "") -> None:
        self.asked: list[str] = []
        self.misleading = misleading
        self.gone_at = gone_at

    def __call__(self, request: httpx.Request) -> httpx.Response:
        token = request.url.params.get("continue", "")
        self.asked.append(token)
        if token == self.gone_at and token:
            return httpx.Response(410, json={"kind": "Status", "reason": "Expired"})
        at = "abcde".index(token) if token else 0
        following = "abcde"[at + 1] if at < 4 else ""
        # A text before the metadata that looks like a token: the page itself says otherwise.
        head = '{"note":{"continue":"wrong"},' if self.misleading else ""
        body = page([f"{'abcde'[at]}0", f"{'abcde'[at]}1"], following)
        if head:
            body = head.encode() + body[1:]
        return httpx.Response(200, content=body)


async def test_every_page_is_read_once_in_order() -> None:
    pages = Pages()
    async with kube_served_by(pages, connections=2) as kube:
        items, rv = await kube.list_all("/api/v1/configmaps", page_size=2)
    assert [i["metadata"]["name"] for i in items] == [f"{p}{n}" for p in "abcde" for n in "01"]
    assert rv == "7"
    assert pages.asked == ["", "b", "c", "d", "e"]


async def test_a_token_the_first_bytes_got_wrong_is_asked_again_as_the_page_says() -> None:
    pages = Pages(misleading=True)
    async with kube_served_by(pages, connections=2) as kube:
        items, _ = await kube.list_all("/api/v1/configmaps", page_size=2)
    assert [i["metadata"]["name"] for i in items] == [f"{p}{n}" for p in "abcde" for n in "01"]
    assert [t for t in pages.asked if t != "wrong"] == ["", "b", "c", "d", "e"]


async def test_a_page_that_fails_fails_the_list() -> None:
    async with kube_served_by(Pages(gone_at="c"), connections=2) as kube:
        with pytest.raises(Gone):
            await kube.list_all("/api/v1/configmaps", page_size=2)


async def test_a_list_cancelled_leaves_no_page_asked_for_behind() -> None:
    asked, never = asyncio.Event(), asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("continue"):
            asked.set()
            await never.wait()  # the page asked for ahead never comes
        return Pages()(request)

    async with kube_served_by(slow, connections=2) as kube:
        listing = asyncio.create_task(kube.list_all("/api/v1/configmaps", page_size=2))
        await asked.wait()
        assert kube.pacer.in_flight == 1
        listing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listing
        await asyncio.sleep(0)
        assert kube.pacer.in_flight == 0
