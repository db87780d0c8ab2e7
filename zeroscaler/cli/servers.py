"""The server components' console scripts, which in a command-line-only install say what to add.

The modules are imported by name when the script starts: the command itself never loads them, and
an installation without the `server` extra gets one line naming it instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from zeroscaler import DISTRIBUTION

# The top-level modules only the server extra brings.
SERVER_MODULES = frozenset(
    {"fastapi", "uvicorn", "starlette", "cryptography", "jsonpatch", "prometheus_client"}
    | {"pydantic", "pydantic_settings", "pydantic_core"}
)
INSTALL = f"pip install '{DISTRIBUTION}[server]'"


def launch(script: str, module: str) -> int:
    """Import `module` and run its `main`; a missing server dependency is one line and exit 1."""
    try:
        entry: Callable[[], int | None] = importlib.import_module(module).main
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in SERVER_MODULES:
            raise
        print(
            f"{script}: {e.name} is not installed; the server components need the server extra: "
            f"{INSTALL}",
            file=sys.stderr,
        )
        return 1
    return entry() or 0


def webhook() -> int:
    """`zeroscaler-webhook`."""
    return launch("zeroscaler-webhook", "zeroscaler.cli.webhook_main")


def controller() -> int:
    """`zeroscaler-controller`."""
    return launch("zeroscaler-controller", "zeroscaler.cli.controller_main")


def combined() -> int:
    """`zeroscaler-combined`."""
    return launch("zeroscaler-combined", "zeroscaler.cli.combined_main")
