"""Small process helpers shared by the launcher, the demo, benchmarks and system tests."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, grace: float = 20.0) -> None:
    """Signal a child and wait for it; kill it if it outlives `grace` seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running(cmd: Sequence[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run `cmd` with its output appended to `log`; stop it on leaving the block."""
    with log.open("ab") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        stop(proc)
