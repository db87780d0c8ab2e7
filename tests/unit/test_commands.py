"""What the commands share: how they are stopped, and the certificate files the webhook needs."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import pytest

from zeroscaler.cli.combined_main import main as combined_main
from zeroscaler.cli.webhook_main import main as webhook_main
from zeroscaler.runtime.shutdown import stop_on_signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_sigterm_and_sigint_set_the_stop_event(sig: signal.Signals) -> None:
    stop = stop_on_signals()
    assert not stop.is_set()
    os.kill(os.getpid(), sig)
    await asyncio.wait_for(stop.wait(), 5)


@pytest.mark.parametrize(
    ("run", "argv", "said"),
    [
        (
            webhook_main,
            ["--cert-file", "tls.crt"],
            "zeroscaler-webhook: --cert-file and",
        ),
        (combined_main, ["--", "--key-file", "tls.key"], "zeroscaler-combined: after --, --cert"),
    ],
)
def test_the_webhook_refuses_to_start_without_both_certificate_files(
    run: Callable[[list[str]], object], argv: list[str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("ZEROSCALER_"):
            monkeypatch.delenv(name)
    with pytest.raises(SystemExit) as e:
        run(argv)
    assert str(e.value.code).startswith(said)
