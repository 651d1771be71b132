"""``unix-socket``: a hilltop transport for two peers on the same host.

Each side that may listen opens a Unix-domain socket in a fresh private directory and
advertises it as a ``unix-socket-v1`` hint: ``{"type": "unix-socket-v1", "path": "..."}``.
The peer dials that path. Nothing here knows about the transit handshake, encryption or who
wins the race: hilltop runs the handshake over whatever stream this plugin hands back, exactly
as it does for TCP.

Only paths of the shape this plugin creates (``.../hilltop-*/transit.sock``) are dialled, so a
peer cannot point us at some other local service's socket.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import UNIXClientEndpoint
from twisted.internet.protocol import Factory

from hilltop.hints import RawHint
from hilltop.hookspecs import TransitSession, TransportInfo, hookimpl
from hilltop.streams import TCPStream

__all__ = ["HINT_TYPE", "NAME", "UnixSocket", "dialable_path"]

NAME = "unix-socket"
HINT_TYPE = "unix-socket-v1"
SOCKET_NAME = "transit.sock"
DIR_PREFIX = "hilltop-"
MAX_PATH = 107  # sun_path holds 108 bytes including the terminating NUL on Linux


def dialable_path(path: Any) -> str | None:
    """The path if it is one this plugin could have created, else None."""
    if not isinstance(path, str) or "\0" in path or not os.path.isabs(path):
        return None
    if len(os.fsencode(path)) > MAX_PATH or os.path.normpath(path) != path:
        return None
    parent, name = os.path.split(path)
    if name != SOCKET_NAME or not os.path.basename(parent).startswith(DIR_PREFIX):
        return None
    return path


class _Inbound(Factory):
    """Wraps each accepted connection in a stream and hands it to the session."""

    def __init__(self, session: TransitSession, path: str) -> None:
        self.session = session
        self.path = path

    def buildProtocol(self, addr: Any) -> TCPStream:  # noqa: N802 (Twisted naming)
        return _InboundStream(self.session, f"{NAME} {self.path} (inbound)")


class _InboundStream(TCPStream):
    def __init__(self, session: TransitSession, description: str) -> None:
        super().__init__(description)
        self._session = session

    def connectionMade(self) -> None:  # noqa: N802
        self._session.offer_inbound(self)


class UnixSocket:
    """The transport. hilltop makes one instance per set of loaded transports."""

    api = 1  # the hilltop plugin api this class is written for

    def __init__(self) -> None:
        self._listening: dict[int, tuple[Any, str]] = {}  # id(session) -> (port, directory)

    @hookimpl
    def hilltop_transport_info(self) -> TransportInfo:
        return TransportInfo(
            name=NAME,
            hint_types=(HINT_TYPE,),
            tier=0,
            usable=hasattr(socket, "AF_UNIX"),
            why_not="this system has no Unix-domain sockets",
            description="same-host transfers over a Unix-domain socket",
        )

    @hookimpl
    def hilltop_transport_start(self, session: TransitSession) -> list[RawHint]:
        if session.no_listen or session.tor:
            return []
        settings = session.options.get(NAME) or {}
        base = settings.get("dir") or os.environ.get("XDG_RUNTIME_DIR") or None
        directory = tempfile.mkdtemp(prefix=DIR_PREFIX, dir=base)
        path = os.path.join(directory, SOCKET_NAME)
        if dialable_path(path) is None:  # e.g. too long for sun_path
            shutil.rmtree(directory, ignore_errors=True)
            return []
        # Other users may dial us (same-host transfers between accounts): the directory
        # can be traversed but not listed, and the transit handshake keeps strangers out.
        os.chmod(directory, 0o711)
        try:
            port = session.reactor.listenUNIX(path, _Inbound(session, path), mode=0o666)
        except Exception:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        self._listening[id(session)] = (port, directory)
        return [RawHint.make(HINT_TYPE, path=path, priority=0.0)]

    @hookimpl
    def hilltop_transport_connect(self, hint: Any, session: TransitSession) -> Any:
        if hint.type != HINT_TYPE or session.tor:
            return None
        raw = hint.get("path") if isinstance(hint, RawHint) else getattr(hint, "path", None)
        path = dialable_path(raw)
        if path is None:
            return defer.fail(ValueError(f"{HINT_TYPE} hint has no usable path: {raw!r}"))
        endpoint = UNIXClientEndpoint(session.reactor, path, timeout=10)
        # the endpoint's Deferred aborts the connection attempt when cancelled
        return endpoint.connect(Factory.forProtocol(lambda: TCPStream(f"{NAME} {path}")))

    @hookimpl
    def hilltop_transport_stop(self, session: TransitSession) -> defer.Deferred[None]:
        port, directory = self._listening.pop(id(session), (None, None))
        d = defer.maybeDeferred(port.stopListening) if port is not None else defer.succeed(None)

        def tidy(result: Any) -> Any:
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
            return result

        return d.addBoth(tidy)
