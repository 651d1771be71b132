"""The official mailbox server 0.8 without ``welcome["your-address"]``, as servers before 0.8
behave: the NAT lab's case of a mailbox that does not tell a client its public address.

Run with the peers venv's interpreter, arguments as ``twist``'s: ``python THIS wormhole-mailbox
--port ...``. The welcome is the server's own, only the address is left out.
"""

from __future__ import annotations

import sys
from typing import Any

from twisted.application.twist._twist import Twist
from wormhole_mailbox_server import server_websocket


def _welcome_without_address(self: Any) -> None:
    self.send("welcome", welcome=self.factory._server.get_welcome())


server_websocket.WebSocketServer.onOpen = _welcome_without_address  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(Twist.main(["twist", *sys.argv[1:]]))
