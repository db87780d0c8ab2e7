"""TLS for the webhook server: TLS 1.2 or later, and the serving certificate reloaded on change."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from pathlib import Path

log = logging.getLogger(__name__)


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server context that refuses anything older than TLS 1.2."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class CertReloader:
    """Loads a changed certificate pair into the live context; open connections are not touched."""

    def __init__(self, ctx: ssl.SSLContext, cert_file: str, key_file: str) -> None:
        self.ctx = ctx
        self.cert_file = cert_file
        self.key_file = key_file
        self.reloads = 0
        self._stamp = self._read_stamp()

    def _read_stamp(self) -> tuple[float, int, float, int] | None:
        try:
            c, k = os.stat(self.cert_file), os.stat(self.key_file)
        except OSError:
            return None
        return (c.st_mtime, c.st_size, k.st_mtime, k.st_size)

    def check(self) -> bool:
        """Reload if the files changed and form a valid pair; True when reloaded."""
        stamp = self._read_stamp()
        if stamp is None or stamp == self._stamp:
            return False
        try:
            # Check the pair on a scratch context first, so a half-written pair is never served.
            server_context(self.cert_file, self.key_file)
            self.ctx.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as e:
            log.warning("certificate files changed but do not load yet: %s", e)
            return False
        self._stamp = stamp
        self.reloads += 1
        log.info("serving certificate reloaded from %s", Path(self.cert_file).name)
        return True

    async def watch(self, interval: float) -> None:
        """Check every `interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.check()
