"""Official 0.24 as a Dilation library peer: ``dilate()`` and one subchannel ("echo").

    python official_dilation_peer.py MAILBOX_URL CODE open SIZE [TRANSIT_HELPER]
    python official_dilation_peer.py MAILBOX_URL CODE listen [TRANSIT_HELPER]

``open``: opens an "echo" subchannel, writes SIZE pseudo-random bytes, reads them back and
prints ``echoed SIZE SHA256``. ``listen``: echoes every byte of the peer's "echo" subchannel
and prints ``served SIZE SHA256`` when the peer closes it. Runs in the peers venv
(``magic-wormhole[dilate]==0.24.0``).
"""

import hashlib
import sys

from twisted.internet import defer, task
from twisted.internet.protocol import Factory, Protocol
from wormhole import create

APPID = "hilltop.example/dilation-test"


def payload(size):
    out = bytearray()
    block = b"seed"
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


class Echo(Protocol):
    def connectionMade(self):
        self.seen = hashlib.sha256()
        self.count = 0

    def dataReceived(self, data):
        self.seen.update(data)
        self.count += len(data)
        self.transport.write(data)

    def connectionLost(self, reason):
        print(f"served {self.count} {self.seen.hexdigest()}", flush=True)
        self.factory.done.callback(None)


class Client(Protocol):
    def connectionMade(self):
        self.got = bytearray()
        self.transport.write(self.factory.data)

    def dataReceived(self, data):
        self.got += data
        if len(self.got) >= len(self.factory.data):
            print(f"echoed {len(self.got)} {hashlib.sha256(self.got).hexdigest()}", flush=True)
            self.transport.loseConnection()

    def connectionLost(self, reason):
        self.factory.done.callback(None)


async def main(reactor, url, code, mode, *rest):
    w = create(APPID, url, reactor, dilation=True)
    w.set_code(code)
    helper = rest[-1] if rest and rest[-1].startswith("tcp:") else None
    dilated = w.dilate(transit_relay_location=helper)
    done = defer.Deferred()
    if mode == "listen":
        f = Factory.forProtocol(Echo)
        f.done = done
        await dilated.listener_for("echo").listen(f)
    else:
        await dilated.listener_for("unused").listen(Factory.forProtocol(Protocol))
        f = Factory.forProtocol(Client)
        f.done = done
        f.data = payload(int(rest[0]))
        await dilated.when_dilated()
        await dilated.connector_for("echo").connect(f)
    await done
    await task.deferLater(reactor, 0.5, lambda: None)
    await w.close()


if __name__ == "__main__":
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, *sys.argv[1:])))
