"""``wormhole --version``'s text, in a module that imports neither click nor Twisted.

Why a module of its own: the whole CLI costs ~0.4 s of CPU to import, and ``--version`` alone
needs none of it (:func:`hilltop.cli.launch.main` answers it before importing the CLI).
"""

from __future__ import annotations

from hilltop import __version__


def version_text() -> str:
    """``--version``: hilltop's version on the first line as before (scripts read it), then
    the wire protocol it speaks with every client and the extensions it adds between two
    hilltops (the ``features`` and ``transports`` its ``version`` message lists).

    Built only when asked: the features are probed through libsodium, which the CLI would
    otherwise import only to make a connection.
    """
    from hilltop.rendezvous import capabilities

    extensions = [*capabilities.FEATURES, *capabilities.extension_transports()]
    return (f"hilltop, version {__version__}\n"
            "protocol: Magic Wormhole v1 (mailbox server v1, transit v1, file transfer v1), "
            "as magic-wormhole 0.24 and wormhole-william speak it\n"
            f"hilltop extensions (used only when both sides list them): {', '.join(extensions)}")
