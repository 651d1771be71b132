"""The CLI keeps pyOpenSSL out until a wss:// mailbox needs it, and wss:// still speaks TLS.

Run in a fresh interpreter: whether pyOpenSSL is loaded depends on the process's first imports.
"""

from __future__ import annotations

import textwrap

from fresh_interpreter import run_fresh

SEND = textwrap.dedent("""
    import sys
    from hilltop.cli.main import cli  # the CLI opts in, as the wormhole command does
    try:  # the whole send command, up to its first mailbox connection (refused here)
        cli(["--relay-url", "ws://127.0.0.1:1/v1", "send", "--text", "hi"], prog_name="wormhole")
    except SystemExit as exit:
        print("exit:", exit.code)
    from hilltop.rendezvous import client# what a transfer adds
    from hilltop.transfer import session
    from hilltop.transit import bulkpump, runner
    from hilltop.transports import direct_tcp, relay
    client._autobahn()
    print("OpenSSL loaded:", "OpenSSL" in sys.modules)
    print("WAMP loaded:", "autobahn.twisted.wamp" in sys.modules)
    import autobahn.twisted.websocket as ws
    print("client factory:", ws.WebSocketClientFactory.__name__)
""")

WSS = textwrap.dedent("""
    import socket, sys, threading
    import hilltop.cli.main  # opts in
    from hilltop._runtime.reactor import install_asyncio_reactor
    reactor = install_asyncio_reactor()
    from hilltop.rendezvous import client
    client._autobahn()
    from twisted.internet import protocol
    print("before:", "OpenSSL" in sys.modules)
    print("plain:", type(client.default_endpoint(reactor, "localhost", 1, False)).__name__)
    from hilltop.tor.manager import TorManager  # --tor with a wss:// mailbox: TLS through Tor
    through_tor = TorManager(reactor).endpoint_factory(reactor, "example.org", 443, True)
    print("tor wss:", hasattr(through_tor, "connect"))

    server = socket.create_server(("127.0.0.1", 0))
    first = []
    def accept():
        conn, _ = server.accept()
        first.append(conn.recv(3))
        conn.close()
    threading.Thread(target=accept, daemon=True).start()
    port = server.getsockname()[1]
    ep = client.default_endpoint(reactor, "127.0.0.1", port, True)
    d = ep.connect(protocol.Factory.forProtocol(protocol.Protocol))
    d.addBoth(lambda _: reactor.callLater(0.5, reactor.stop))
    reactor.callLater(10, reactor.stop)
    reactor.run()
    print("after wss:", "OpenSSL" in sys.modules)
    print("first bytes:", first[0].hex() if first else None)
""")


def _run(probe: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in run_fresh(probe).splitlines())


def test_a_send_runs_without_openssl() -> None:
    lines = _run(SEND)
    assert lines["exit"] == "1"  # the refused mailbox, reported as an error
    assert lines["OpenSSL loaded"] == "False"


def test_a_send_loads_autobahns_websocket_client_without_its_wamp_stack() -> None:
    """autobahn.twisted's __init__ imports the WAMP client: 30-40 ms a process
    (bench/README.md, "Time budget"); the CLI skips it (lazytls.skip_autobahn_wamp)."""
    lines = _run(SEND)
    assert lines["WAMP loaded"] == "False"
    assert lines["client factory"] == "WebSocketClientFactory"


def test_wss_still_speaks_tls() -> None:
    lines = _run(WSS)
    assert lines["before"] == "False"
    assert lines["plain"] == "SharedPortEndpoint"
    assert lines["tor wss"] == "True"  # Twisted's wrapClientTLS would raise without pyOpenSSL
    assert lines["after wss"] == "True"
    assert lines["first bytes"].startswith("1603")  # a TLS handshake record: ClientHello


def test_library_imports_are_left_alone() -> None:
    """Without the CLI's opt-in, Twisted is imported exactly as usual."""
    probe = ("import sys, hilltop.api; "
             "from hilltop._runtime.reactor import install_asyncio_reactor; "
             "install_asyncio_reactor(); print('OpenSSL' in sys.modules)")
    assert run_fresh(probe).strip() == "True"
