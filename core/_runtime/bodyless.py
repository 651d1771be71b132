"""A twisted.web request that takes no body: refused before one byte of it is read.

Why: ``twisted.web`` spools every request body above 100 kB (and every chunked one) to a
temporary file until it is complete, whatever its size, before any resource sees the request.
hilltop's servers (the ``--lan`` mailbox, the ``--browser`` page) take GETs and WebSocket
upgrades only, so anybody on the network could fill ``TMPDIR`` with one ``POST``: a 1.5 GB
``Content-Length`` filled a 200 MiB tmpfs in 0.2 s (issue 27, item 14). A request that announces
a body (a ``Content-Length`` above zero, or ``Transfer-Encoding: chunked``) is answered
``413`` and its connection closed as soon as its headers are in; what it sends after that is
dropped unread.

Use it as a site's request factory: ``site.requestFactory = BodylessRequest``.
"""

from __future__ import annotations

from typing import Any

from twisted.web import server

REFUSAL = (b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")


class _Discard:
    """Stands in for the request's content file: the refused body goes nowhere."""

    def write(self, data: bytes) -> None:
        pass

    def seek(self, offset: int, whence: int = 0) -> int:
        return 0

    def read(self, size: int = -1) -> bytes:
        return b""

    def close(self) -> None:
        pass


class BodylessRequest(server.Request):
    """A request of a server that takes no bodies (see the module's docstring)."""

    refused = False

    def gotLength(self, length: int | None) -> None:  # noqa: N802 - twisted.web's name
        if length == 0:
            super().gotLength(length)
            return
        self.refused = True
        self.content = _Discard()  # type: ignore[assignment]
        # no "100 Continue" after the refusal: twisted.web sends it after this call
        self.requestHeaders.removeHeader(b"expect")
        transport: Any = self.channel.transport
        if transport is not None:
            transport.write(REFUSAL)
            transport.loseConnection()  # stops reading at once; the refusal still goes out

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:  # noqa: N802
        if self.refused:
            return  # a body small enough to arrive with its headers is not served either
        super().requestReceived(command, path, version)
