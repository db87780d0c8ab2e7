"""Hooks for every test tree.

Tests written as `async def` run each on a fresh asyncio loop, without a plugin: `asyncio.run`
runs them, as it runs the commands themselves, so a test drives the code it tests on the loop that
code expects, and nothing of one test's loop is left for the next.

`make test` runs the tests on two workers (pytest-xdist, `--dist loadgroup`), each with a control
plane of its own. Every test that needs the real node is kept on one worker: the node's
host-network pods share the loopback with the other worker's, so two nodes would race for ports.
The rest go by module, so a module's fixtures are made once.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

NODE_GROUP = "real-node"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that need the real node, group the tests for the workers, and order them
    so the longest work is handed out first: the real node's group, the other system tests,
    then the short chart and unit tests that fill the gaps at the end."""
    for item in items:
        if "real_node" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_node)
        on_node = item.get_closest_marker("real_node") is not None
        module = item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(NODE_GROUP if on_node else module))
    order = {item.nodeid: i for i, item in enumerate(items)}

    def rank(item: pytest.Item) -> tuple[int, int]:
        if item.get_closest_marker("real_node") is not None:
            return 0, order[item.nodeid]
        return (1 if "system" in item.path.parts else 2), order[item.nodeid]

    items.sort(key=rank)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine test to completion; leave every other test to pytest."""
    test = pyfuncitem.obj
    if not inspect.iscoroutinefunction(test):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(test(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True
