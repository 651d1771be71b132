"""The local HTTP server of ``wormhole send --browser``: the page, from the installed package.

It serves exactly the files of ``hilltop/cli/browser_page`` (built from ``web/`` and shipped
as package data), so nothing is fetched from the internet at run time, and nothing else: no
directory listing, no other path. The code travels in the URL's fragment, which browsers never
send to a server, so this server never sees it. Headers keep the page from being cached or
framed and from loading anything but itself and the mailbox WebSocket.

Anyone on the network can connect to the port, so it is guarded
(:func:`hilltop._runtime.httpguard.guard_site`): no request body is read, and connections are
capped per address and in all, idle ones closed after a few seconds (:data:`PAGE_LIMITS`).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from twisted.web import resource, server

from hilltop._runtime.httpguard import ConnectionLimits, guard_site
from hilltop.errors import LocalError

PAGE_FILES = {
    "index.html": "text/html; charset=utf-8",
    "hilltop.js": "text/javascript; charset=utf-8",
    "sw.js": "text/javascript; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
}
HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data: blob:; "
        "frame-src 'self'; frame-ancestors 'none'; worker-src 'self'; base-uri 'none'"),
}

PAGE_LIMITS = ConnectionLimits(per_address=8, total=32, idle_seconds=10.0)
"""A browser opens up to 6 connections to a host and fetches four small files; 32 in all keeps
the descriptors the page can cost far below a 256 limit (the transfer needs the rest), and 10 s
idle lets a flood of silent connections make room quickly for the real browser."""


def page_file(name: str) -> bytes:
    """One file of the built page; a missing build is a broken installation."""
    try:
        return resources.files("hilltop.cli").joinpath("browser_page", name).read_bytes()
    except (FileNotFoundError, OSError):
        raise LocalError(f"this hilltop installation lacks its browser page ({name}); "
                         "reinstall hilltop") from None


class PageResource(resource.Resource):
    """GET / and the page's files; 404 for anything else."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self._files = {name: page_file(name) for name in PAGE_FILES}

    def render_GET(self, request: Any) -> bytes:  # noqa: N802 - twisted.web's name
        path = request.path.decode("latin-1")
        name = "index.html" if path == "/" else path.lstrip("/")
        for header, value in HEADERS.items():
            request.setHeader(header, value)
        body = self._files.get(name)
        if body is None:
            request.setResponseCode(404)
            request.setHeader("Content-Type", "text/plain; charset=utf-8")
            return b"not found\n"
        request.setHeader("Content-Type", PAGE_FILES[name])
        return body

    def render_HEAD(self, request: Any) -> bytes:  # noqa: N802
        return self.render_GET(request)


class _QuietSite(server.Site):
    """No access log: nothing about who opened the page is written anywhere."""

    def log(self, request: Any) -> None:
        pass


class PageServer:
    """Serves the page on ``address:port`` (port 0: any free one) until :meth:`stop`."""

    def __init__(self, reactor: Any, address: str, port: int = 0) -> None:
        self._reactor = reactor
        self.address = address
        self.port = port
        self._listening: Any = None

    def start(self) -> int:
        from twisted.internet.error import CannotListenError

        site = _QuietSite(PageResource())
        site.displayTracebacks = False
        try:
            self._listening = self._reactor.listenTCP(self.port, guard_site(site, PAGE_LIMITS),
                                                      interface=self.address)
        except CannotListenError as err:
            raise LocalError(f"cannot serve the browser page on {self.address}:{self.port}: "
                             f"{err.socketError}") from None
        self.port = self._listening.getHost().port
        return self.port

    async def stop(self) -> None:
        if self._listening is not None:
            listening, self._listening = self._listening, None
            await listening.stopListening()
