"""``wormhole completion bash|zsh|fish``: shell completion of commands, flags and live codes.

Decision: the scripts are click's own (``click.shell_completion``), printed by this command,
rather than hand-written files. They ask ``wormhole`` itself what to complete, so every command
and flag that exists is completed, including ones added later, and no list can go stale.
``receive``'s code argument completes from the mailbox server (the nameplates in use now,
through ``Wormhole.list_nameplates``) and then the words, with the same rules as the code
prompt (:func:`hilltop.rendezvous.codes.complete`); both sides of a typed code need only the
server the command line names (``--relay-url`` or ``WORMHOLE_RELAY_URL``).
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

import click
from click.shell_completion import CompletionItem, get_completion_class

COMPLETE_VAR = "_WORMHOLE_COMPLETE"
"""click's variable for the program name ``wormhole`` (the ``hilltop`` alias shares it)."""

NAMEPLATE_TIMEOUT = 3.0
"""Seconds a Tab may wait for the server's list of nameplates; after that, no candidates."""

INSTALL = {
    "bash": "eval \"$(wormhole completion bash)\"   # in ~/.bashrc",
    "zsh": "eval \"$(wormhole completion zsh)\"    # in ~/.zshrc (after compinit)",
    "fish": "wormhole completion fish > ~/.config/fish/completions/wormhole.fish",
}


@click.command(name="completion")
@click.argument("shell", type=click.Choice(sorted(INSTALL)))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    bash:  eval "$(wormhole completion bash)"   (add it to ~/.bashrc)
    zsh:   eval "$(wormhole completion zsh)"    (add it to ~/.zshrc, after compinit)
    fish:  wormhole completion fish > ~/.config/fish/completions/wormhole.fish
    """
    from hilltop.cli.main import cli

    complete_class = get_completion_class(shell)
    assert complete_class is not None  # the Choice allows only the three click knows
    script = complete_class(cli, {}, "wormhole", COMPLETE_VAR).source()
    if shell == "bash":
        script += BASH_NO_SPACE
    click.echo(script)


BASH_NO_SPACE = """
# hilltop: a code completed up to a hyphen ("4-", "4-purple-") goes on without a space
_wormhole_completion_nospace() {
    _wormhole_completion "$@"
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *- ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}
complete -o nosort -F _wormhole_completion_nospace wormhole hilltop
"""
"""bash adds a space after a single candidate; for a code that goes on, that space is in the
way. (zsh and fish use click's scripts as they are.)"""


def complete_code(ctx: click.Context, _param: click.Parameter,
                  incomplete: str) -> list[CompletionItem]:
    """Candidates for a partly typed code: live nameplates, then words.

    Never raises and never prints: whatever goes wrong (no server, a slow one), the shell
    just gets no candidates.
    """
    from hilltop.rendezvous import codes

    length = ctx.params.get("code_length") or 2
    nameplates: tuple[str, ...] = ()
    if "-" not in incomplete:
        root = ctx.find_root().params
        from hilltop import api

        nameplates = list_nameplates_now(root.get("appid") or api.APPID,
                                         root.get("relay_url") or api.RELAY_URL)
    return [CompletionItem(c) for c in codes.complete(incomplete, nameplates, length)]


def list_nameplates_now(appid: str, relay_url: str,
                        timeout: float = NAMEPLATE_TIMEOUT) -> tuple[str, ...]:
    """The server's nameplates in use, fetched in a reactor run of their own (a completion
    process does nothing else); empty if they did not arrive within ``timeout``."""
    from twisted.internet.defer import ensureDeferred
    from twisted.logger import ILogObserver, globalLogBeginner

    from hilltop import api
    from hilltop._runtime.reactor import install_asyncio_reactor

    reactor = install_asyncio_reactor()
    # the shell shows whatever we print: Twisted must not print its log
    globalLogBeginner.beginLoggingTo([cast(ILogObserver, lambda _event: None)],
                                     redirectStandardIO=False)
    found: list[tuple[str, ...]] = []

    async def fetch() -> None:
        w = api.Wormhole(appid, relay_url, reactor=reactor)
        try:
            found.append(tuple(await w.list_nameplates()))
        finally:
            with contextlib.suppress(Exception):
                await w.close()

    def stop(_: Any) -> None:
        with contextlib.suppress(Exception):
            reactor.stop()

    def start() -> None:
        d = ensureDeferred(fetch())
        d.addTimeout(timeout, reactor)
        d.addErrback(lambda _: None)
        d.addBoth(stop)
        reactor.callLater(timeout + 1.0, stop, None)  # even if closing the wormhole hangs

    reactor.callWhenRunning(start)
    reactor.run(installSignalHandlers=False)
    return found[0] if found else ()
