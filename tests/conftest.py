"""Tests written as `async def` run each on a fresh asyncio loop, without a plugin.

`asyncio.run` runs them, as it runs the commands themselves, so a test drives the code it tests on
the loop that code expects, and nothing of one test's loop is left for the next.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine test to completion; leave every other test to pytest."""
    test = pyfuncitem.obj
    if not inspect.iscoroutinefunction(test):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(test(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True
