"""A file sender loads its transit machinery while the versions cross, not after."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer, task

from hilltop.cli import send as cli_send
from hilltop.transfer import session


class KeyedWormhole:
    """The key is established; the peer's version comes when the test says."""

    def __init__(self) -> None:
        self.versions: defer.Deferred[dict] = defer.Deferred()

    def get_verifier(self) -> defer.Deferred[bytes]:
        return defer.succeed(b"\x01" * 32)

    def get_peer_versions(self) -> defer.Deferred[dict]:
        return self.versions


@pytest.mark.parametrize("follows", [True, False])
@pytest_twisted.ensureDeferred
async def test_a_file_sender_warms_up_before_the_peers_version(
        monkeypatch: pytest.MonkeyPatch, follows: bool) -> None:
    warmed: list[Any] = []
    monkeypatch.setattr(session, "warm_up_transit", warmed.append)
    options = session.TransitOptions()
    clock = task.Clock()
    w = KeyedWormhole()
    confirming: Any = defer.ensureDeferred(
        cli_send.confirm_key(clock, w, False,  # type: ignore[arg-type]
                             transit_follows=options if follows else None))
    clock.advance(0)
    assert warmed == ([options] if follows else [])  # before the version arrived
    assert not confirming.called
    w.versions.callback({})
    assert await confirming == {}
