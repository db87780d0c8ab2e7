"""The API client's sockets: every pool httpx makes gets the cheaper idle check, and the check
tells an idle connection from one the server hung up, as httpcore's own does."""

from __future__ import annotations

import socket
from typing import Any

import httpcore
import httpx

from zeroscaler.network import Network, Stream, cheap_idle_checks


class _Inner(httpcore.AsyncNetworkStream):
    """A connection's stream over one end of a socket pair."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.asked: list[str] = []

    def get_extra_info(self, info: str) -> Any:
        self.asked.append(info)
        return self.sock if info == "socket" else None


def test_every_pool_of_a_client_gets_the_cheaper_check() -> None:
    direct = httpx.AsyncClient()
    assert cheap_idle_checks(direct) == 1
    assert isinstance(direct._transport._pool._network_backend, Network)  # type: ignore[attr-defined]
    # A proxy's pool too: its tunnels are connections like any other.
    assert cheap_idle_checks(httpx.AsyncClient(proxy="http://192.0.2.1:3128")) == 2
    # A stand-in transport has no pool and is left as it is.
    assert (
        cheap_idle_checks(
            httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(200)))
        )
        == 0
    )


def test_an_idle_connection_is_readable_only_once_the_server_hangs_up() -> None:
    ours, theirs = socket.socketpair()
    inner = _Inner(ours)
    stream = Stream(inner)
    assert stream.get_extra_info("is_readable") is False
    theirs.close()  # the server hung up: the next read gives the end of the stream
    assert stream.get_extra_info("is_readable") is True
    ours.close()
    assert stream.get_extra_info("is_readable") is True
    # The socket was looked up once, when the stream was made, not on every check.
    assert inner.asked == ["socket"]
    # Anything else is asked of the stream underneath.
    assert stream.get_extra_info("ssl_object") is None
    assert inner.asked == ["socket", "ssl_object"]


def test_a_stream_without_a_socket_asks_the_one_underneath() -> None:
    class Plain(httpcore.AsyncNetworkStream):
        def get_extra_info(self, info: str) -> Any:
            return "theirs" if info == "is_readable" else None

    assert Stream(Plain()).get_extra_info("is_readable") == "theirs"


def test_data_waiting_on_an_idle_connection_makes_it_readable() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        stream = Stream(_Inner(ours))
        theirs.sendall(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
        assert stream.get_extra_info("is_readable") is True
