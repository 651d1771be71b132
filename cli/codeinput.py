"""Typing a code at the prompt, with tab completion of nameplates and words.

``input()`` blocks, so it runs in a thread; the completer reaches back into the reactor with
``blockingCallFromThread`` to list nameplates and to claim the nameplate as soon as "N-" is
typed (as the official client does, so the PAKE can start the moment the words are done).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.threads import blockingCallFromThread

from hilltop.api import Wormhole
from hilltop.cli import events, prompts
from hilltop.errors import LocalError
from hilltop.rendezvous import codes

PROMPT = "Enter receive wormhole code: "


class _Completer:
    def __init__(self, reactor: Any, w: Wormhole, length: int) -> None:
        self._reactor = reactor
        self._w = w
        self._length = length
        self._matches: list[str] = []
        self._claimed: str | None = None

    def __call__(self, text: str, state: int) -> str | None:
        try:
            if state == 0:
                self._matches = self._compute(text)
            return self._matches[state] if state < len(self._matches) else None
        except Exception:  # noqa: BLE001 - a completer must never kill the prompt
            return None

    def _compute(self, text: str) -> list[str]:
        nameplate, dash, _ = text.partition("-")
        nameplates: tuple[str, ...] = ()
        if not dash:
            nameplates = blockingCallFromThread(self._reactor, self._w.list_nameplates)
        elif self._claimed is None and nameplate.isdigit():
            self._claimed = nameplate
            blockingCallFromThread(self._reactor, self._w.claim_nameplate, nameplate)
        return codes.complete(text, nameplates, self._length)


def _prompt(completer: _Completer | None) -> str:
    if completer is not None:
        import readline

        readline.set_completer(completer)
        readline.set_completer_delims("")
        readline.parse_and_bind("tab: complete")
    try:
        return input(PROMPT)
    except EOFError:
        raise LocalError("no code was entered") from None


def _prompt_in_background(reactor: Any, completer: _Completer | None) -> Deferred[str]:
    """The typed code, read by a daemon thread of its own.

    Why not ``deferToThread``: the reactor's thread pool is joined when the reactor stops, and
    nothing can wake a thread blocked in ``input()``, so a SIGTERM or Ctrl-C at the prompt
    left the command waiting until someone pressed Enter. A daemon thread is left behind
    instead; an answer that comes after the interrupt cancelled the wait is dropped.
    """
    answer: Deferred[str] = Deferred()

    def settle(outcome: str | LocalError) -> None:
        if answer.called:  # cancelled by an interrupt
            return
        if isinstance(outcome, LocalError):
            answer.errback(outcome)
        else:
            answer.callback(outcome)

    def ask() -> None:
        try:
            outcome: str | LocalError = _prompt(completer)
        except LocalError as err:
            outcome = err
        reactor.callFromThread(settle, outcome)

    threading.Thread(target=ask, name="code prompt", daemon=True).start()
    return answer


async def read_code(reactor: Any, w: Wormhole, length: int) -> str:
    """Prompt for the code (completion on a terminal), then set it on ``w``."""
    interactive = sys.stdin.isatty()
    completer = None
    if interactive:
        completer = _Completer(reactor, w, length)
        prompts.save_terminal()  # readline's raw mode outlives an interrupted prompt
    with prompts.on_screen(PROMPT):
        typed = (await _prompt_in_background(reactor, completer)).strip()
    w.set_code(typed)
    return typed


async def allocate_code(w: Wormhole, length: int) -> str:
    """``receive --allocate``: the receiver gets the code and tells the sender what to type.

    The same three lines official 0.24 prints, so instructions written for it still match;
    the sender then runs ``send --code``, which hilltop and wormhole-william both have.
    """
    code = await w.allocate_code(length)
    events.emit("code", f"Allocated code: {code}", code=code)
    events.human("On the other computer, please run:")
    events.human(f"   wormhole send --code {code} <filename>")
    return code
