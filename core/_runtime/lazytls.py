"""pyOpenSSL only in processes that open a TLS connection (a ``wss://`` mailbox).

Why: Twisted's reactor, TCP and endpoints modules and autobahn all try ``import OpenSSL`` when
they are first imported, only to offer TLS, and fall back quietly without it. That import
(pyOpenSSL and the X.509 half of ``cryptography``) costs every ``wormhole`` process ~5 MB of
peak RSS and ~40 ms of start-up, while the default mailbox (``ws://``) and every transit
connection are plain TCP. The CLI opts in with :func:`defer_openssl` before importing any of
them; those imports then run inside :func:`openssl_deferred` and take their no-TLS branch.
A ``wss://`` mailbox still works: :func:`wrap_client_tls` imports TLS support itself, at
connection time. Library users who do not opt in see no difference.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from twisted.internet.interfaces import IStreamClientEndpoint
from zope.interface import implementer

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred
    from twisted.internet.interfaces import (
        IOpenSSLClientConnectionCreator,
        IProtocol,
        IProtocolFactory,
    )

_deferring = False


def defer_openssl() -> None:
    """Let :func:`openssl_deferred` keep pyOpenSSL out of this process (the CLI calls it)."""
    global _deferring
    _deferring = True


@contextmanager
def openssl_deferred() -> Iterator[None]:
    """Inside: ``import OpenSSL`` fails (if the process opted in and it is not loaded yet),
    so modules imported here for the first time take their no-TLS branch."""
    if not _deferring or "OpenSSL" in sys.modules:
        yield
        return
    sys.modules["OpenSSL"] = None  # type: ignore[assignment]  # makes the import fail
    try:
        yield
    finally:
        if "OpenSSL" in sys.modules and sys.modules["OpenSSL"] is None:
            del sys.modules["OpenSSL"]


def skip_autobahn_wamp() -> None:
    """In a process that opted in (:func:`defer_openssl`), make ``autobahn.twisted`` a bare
    package whose ``__init__`` never runs, so ``autobahn.twisted.websocket`` loads alone.

    Why: that ``__init__`` imports the WAMP client (``autobahn.twisted.wamp``, Twisted's
    ``application.service`` and ``persisted.sob``, hyperlink) to re-export names nobody here
    uses; measured after the reactor, importing the WebSocket client took 64-139 ms and 69
    modules with it, 28-97 ms and 54 without, and 0.8 MB less peak RSS (bench/README.md,
    "Time budget"). The submodules import each other by their full names, which a bare
    package resolves. Library users who do not opt in get autobahn's own package.
    """
    if not _deferring or "autobahn.twisted" in sys.modules:
        return
    import importlib.util

    spec = importlib.util.find_spec("autobahn.twisted")
    if spec is None or not spec.submodule_search_locations:
        return  # not installed as a package: the ordinary import reports it
    sys.modules["autobahn.twisted"] = importlib.util.module_from_spec(spec)  # not executed


def wrap_client_tls(host: str, endpoint: IStreamClientEndpoint,
                    ca_pem: bytes | None = None) -> IStreamClientEndpoint:
    """``endpoint`` with TLS on top, checking ``host``'s certificate against the system's
    trust roots (what ``endpoints.wrapClientTLS`` does, without needing Twisted's endpoints
    module to have seen pyOpenSSL at its import), or against the PEM certificates in
    ``ca_pem`` instead when given (a private relay's own CA). Verification is never off."""
    from twisted.internet import ssl  # pyOpenSSL, now

    if ca_pem is None:
        return _TLSClientEndpoint(ssl.optionsForClientTLS(host), endpoint)
    marker = b"-----END CERTIFICATE-----"
    blocks = [b + marker for b in ca_pem.split(marker) if b"-----BEGIN CERTIFICATE-----" in b]
    if not blocks:
        raise ValueError("no PEM certificate found")
    roots = ssl.trustRootFromCertificates([ssl.Certificate.loadPEM(b) for b in blocks])
    return _TLSClientEndpoint(ssl.optionsForClientTLS(host, trustRoot=roots), endpoint)


@implementer(IStreamClientEndpoint)
class _TLSClientEndpoint:
    def __init__(self, creator: IOpenSSLClientConnectionCreator,
                 wrapped: IStreamClientEndpoint) -> None:
        self._creator = creator
        self._wrapped = wrapped

    def connect(self, factory: IProtocolFactory) -> Deferred[IProtocol]:
        from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol

        def unwrap(tls: IProtocol) -> IProtocol:
            return cast(TLSMemoryBIOProtocol, tls).wrappedProtocol

        connecting = self._wrapped.connect(TLSMemoryBIOFactory(self._creator, True, factory))
        return connecting.addCallback(unwrap)
