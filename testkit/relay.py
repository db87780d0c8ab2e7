"""A loopback TCP relay in front of the API server whose open connections can be cut at will.

TLS passes through untouched (the API server's certificate names 127.0.0.1), so a client pointed at
the relay sees its watch streams break mid-event, as when a load balancer drops them, or fall
silent with nothing closed, as when a NAT entry expires or a peer vanishes.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from localcluster.processes import free_port


class CuttableRelay:
    """Relays 127.0.0.1:`port` to `target_port`; `cut` closes every connection open now, and
    `stall` stops forwarding on them while leaving them open."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.cuts = 0
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._open: set[socket.socket] = set()
        self._stalled: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> int:
        """Close every open connection; returns how many were cut."""
        with self._lock:
            victims, self._open = self._open, set()
            self.cuts += 1
        for s in victims:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        return len(victims) // 2

    def stall(self) -> int:
        """Drop whatever either end sends on every connection open now; returns how many."""
        with self._lock:
            self._stalled |= self._open
            return len(self._open) // 2

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if source not in self._stalled:
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._open -= {source, sink}
                self._stalled -= {source, sink}
