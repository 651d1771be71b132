"""Core acceptance: text messages between hilltop, official magic-wormhole 0.24 and
wormhole-william, through the official mailbox server on loopback.

The CLI contract these tests hold hilltop to:
``wormhole [--relay-url URL] [--appid X] send --text TEXT|- [--code CODE] [--code-length N]
[--verify] [--hide-progress]`` and ``wormhole receive [CODE]``. The sender prints
``Wormhole code is: CODE`` on stderr, the receiver prints the text on stdout, and every
failure is one line on stderr with a non-zero exit and never a traceback.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from serverkit import free_port

if TYPE_CHECKING:  # conftest is pytest's to import; at runtime these come through fixtures
    from conftest import MailboxServer, Peer, Peers, Result

interop = pytest.mark.interop

TEXT = "hello from the other side: ünïcode ✓, two  spaces"
WRONG_WORDS = "aardvark-adroitness"  # real PGP words, just not the ones the sender used


def transfer(peers: Peers, sender: str, receiver: str, text: str = TEXT
             ) -> tuple[Result, Result]:
    """Run ``sender`` with an allocated code, then ``receiver`` with the code it printed."""
    s: Peer = getattr(peers, sender)("send", "--text", text)
    code = s.wait_for_code()
    r: Peer = getattr(peers, receiver)("receive", code)
    received = r.finish()
    return s.finish(), received


def assert_delivered(sent: Result, received: Result, text: str = TEXT) -> None:
    context = f"sender: {sent.describe()}\nreceiver: {received.describe()}"
    assert received.returncode == 0, context
    assert sent.returncode == 0, context
    assert received.stdout.rstrip("\n") == text.rstrip("\n"), context


def error_lines(result: Result) -> list[str]:
    return [ln for ln in result.stderr.splitlines() if re.match(r"(?i)error\b", ln)]


def assert_clean_failure(result: Result, *needles: str) -> None:
    """Non-zero exit, exactly one error line, the expected words, and no traceback."""
    assert result.returncode != 0, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    assert len(error_lines(result)) == 1, result.describe()
    for needle in needles:
        assert needle.lower() in result.stderr.lower(), result.describe()


# --------------------------------------------------------------------------- the harness itself

@interop
def test_text_official_to_official(peers: Peers) -> None:
    """Sanity: the servers and the official peers work through this harness."""
    assert_delivered(*transfer(peers, "official", "official"))


@interop
def test_text_official_to_william(peers: Peers) -> None:
    assert_delivered(*transfer(peers, "official", "william"))


@interop
def test_text_william_to_official(peers: Peers) -> None:
    assert_delivered(*transfer(peers, "william", "official"))


# --------------------------------------------------------------------------- text both ways

@pytest.mark.parametrize(("sender", "receiver"), [
    pytest.param("hilltop", "official", marks=interop, id="hilltop_to_official"),
    pytest.param("official", "hilltop", marks=interop, id="official_to_hilltop"),
    pytest.param("hilltop", "william", marks=interop, id="hilltop_to_william"),
    pytest.param("william", "hilltop", marks=interop, id="william_to_hilltop"),
    pytest.param("hilltop", "hilltop", id="hilltop_to_hilltop"),
])
def test_text(peers: Peers, sender: str, receiver: str) -> None:
    assert_delivered(*transfer(peers, sender, receiver))


@pytest.mark.parametrize("receiver", [
    pytest.param("official", marks=interop),
    pytest.param("william", marks=interop),
    "hilltop",
])
def test_text_from_stdin(peers: Peers, receiver: str) -> None:
    """``--text -`` sends stdin as it is, newlines included.

    The official 0.24 receiver prints a received newline as the two characters backslash and
    n (it escapes control characters), so its output is compared in that form.
    """
    text = "first line\nsecond line, ünïcode\n"
    s = peers.hilltop("send", "--text", "-", "--hide-progress", stdin=text)
    r: Peer = getattr(peers, receiver)("receive", s.wait_for_code())
    sent, received = s.finish(), r.finish()
    shown = text.replace("\n", "\\n") if receiver == "official" else text
    assert_delivered(sent, received, shown)


@pytest.mark.parametrize(("sender", "receiver"), [
    pytest.param("hilltop", "official", marks=interop, id="hilltop_to_official"),
    pytest.param("official", "hilltop", marks=interop, id="official_to_hilltop"),
    pytest.param("hilltop", "william", marks=interop, id="hilltop_to_william"),
    pytest.param("william", "hilltop", marks=interop, id="william_to_hilltop"),
])
def test_fixed_code(peers: Peers, fresh_code: str, sender: str, receiver: str) -> None:
    s: Peer = getattr(peers, sender)("send", "--text", TEXT, "--code", fresh_code)
    assert s.wait_for_code() == fresh_code
    r: Peer = getattr(peers, receiver)("receive", fresh_code)
    assert_delivered(s.finish(), r.finish())


@pytest.mark.parametrize(("sender", "receiver"), [
    pytest.param("hilltop", "official", marks=interop, id="hilltop_to_official"),
    pytest.param("official", "hilltop", marks=interop, id="official_to_hilltop"),
    pytest.param("hilltop", "hilltop", id="hilltop_to_hilltop"),
])
def test_zero_mode(peers: Peers, sender: str, receiver: str) -> None:
    """``-0`` as in the official client: the code is 0-, so it is neither shown nor typed."""
    s: Peer = getattr(peers, sender)("send", "-0", "--text", TEXT)
    r: Peer = getattr(peers, receiver)("receive", "-0")
    sent, received = s.finish(), r.finish()
    assert_delivered(sent, received)
    if sender == "hilltop":
        assert "wormhole receive -0" in sent.stderr, sent.describe()
        assert "Wormhole code is" not in sent.stderr, sent.describe()


@pytest.mark.parametrize("argv", [["send", "-0", "--code", "7-a-b", "--text", "x"],
                                  ["receive", "-0", "7-a-b"],
                                  ["send", "-0", "--lan", "--text", "x"]])
def test_zero_mode_excludes_a_code_and_the_lan(hilltop: Callable[..., Peer],
                                               argv: list[str]) -> None:
    result = hilltop(*argv).finish(30)
    assert result.returncode == 2, result.describe()  # click's usage error
    assert "-0" in result.stderr and "Traceback" not in result.stderr, result.describe()


@interop
def test_code_length(hilltop: Callable[..., Peer], official: Callable[..., Peer]) -> None:
    s = hilltop("send", "--text", TEXT, "--code-length", "3")
    code = s.wait_for_code()
    nameplate, *words = code.split("-")
    assert nameplate.isdigit() and len(words) == 3, code
    r = official("receive", code)
    assert_delivered(s.finish(), r.finish())


def qr_block(stderr: str) -> str:
    """The lines between the code line and the instructions: where both clients draw the QR."""
    between = stderr.split("Wormhole code is: ", 1)[1].split("On the other computer", 1)[0]
    return between.split("\n", 1)[1]


@interop
def test_qr_code_matches_the_official_sender(hilltop: Callable[..., Peer],
                                             official: Callable[..., Peer],
                                             fresh_code: str) -> None:
    """Same code, same picture as official 0.24 (phone apps scan ``wormhole-transfer:CODE``).

    The harness sets ``WORMHOLE_QR=0`` for every peer, so ``--qr`` turns it on and a plain
    send shows that the environment variable turns it off."""
    pictures = {}
    for name, sender in (("official", official), ("hilltop", hilltop)):
        s = sender("send", "--qr", "--code", fresh_code, "--text", TEXT)
        s.wait_for_line("On the other computer")
        r = hilltop("receive", fresh_code)  # one after the other: the nameplate is reused
        assert_delivered(s.finish(), r.finish())
        pictures[name] = qr_block(s.output("stderr"))
    assert pictures["hilltop"] == pictures["official"]
    assert pictures["hilltop"].count("\n") > 10 and "\u2588" in pictures["hilltop"]
    s = hilltop("send", "--code", fresh_code, "--text", TEXT)
    s.wait_for_line("On the other computer")
    r = hilltop("receive", fresh_code)
    assert_delivered(s.finish(), r.finish())
    assert qr_block(s.output("stderr")) == ""


@interop
def test_appid(hilltop: Callable[..., Peer], official: Callable[..., Peer]) -> None:
    appid = "example.com/hilltop-integration"
    s = hilltop("--appid", appid, "send", "--text", TEXT)
    r = official("--appid", appid, "receive", s.wait_for_code())
    assert_delivered(s.finish(), r.finish())


@interop
def test_relay_url_from_environment(hilltop: Callable[..., Peer],
                                    official: Callable[..., Peer]) -> None:
    """No flags at all: WORMHOLE_RELAY_URL and WORMHOLE_TRANSIT_HELPER must be honoured."""
    s = hilltop("send", "--text", TEXT, flags=False)
    r = official("receive", s.wait_for_code())
    assert_delivered(s.finish(), r.finish())


# --------------------------------------------------------------------------- failures

@interop
@pytest.mark.parametrize("peer", ["official", "william"])
def test_wrong_code_on_the_receiving_side(peers: Peers, fresh_code: str, peer: str) -> None:
    """hilltop sends; the peer types the wrong words: both give up, nothing is revealed."""
    s = peers.hilltop("send", "--text", "secret", "--code", fresh_code)
    s.wait_for_code()
    nameplate = fresh_code.split("-")[0]
    r: Peer = getattr(peers, peer)("receive", f"{nameplate}-{WRONG_WORDS}")
    ours, theirs = s.finish(), r.finish()
    assert_clean_failure(ours, "wrong code")
    assert theirs.returncode != 0, theirs.describe()
    assert "secret" not in ours.stdout + theirs.stdout


@interop
@pytest.mark.parametrize("peer", ["official", "william"])
def test_wrong_code_on_the_sending_side(peers: Peers, fresh_code: str, peer: str) -> None:
    """The peer sends; hilltop types the wrong words."""
    s: Peer = getattr(peers, peer)("send", "--text", "secret", "--code", fresh_code)
    s.wait_for_code()
    nameplate = fresh_code.split("-")[0]
    r = peers.hilltop("receive", f"{nameplate}-{WRONG_WORDS}")
    ours, theirs = r.finish(), s.finish()
    assert_clean_failure(ours, "wrong code")
    assert theirs.returncode != 0, theirs.describe()
    assert "secret" not in ours.stdout


def test_wrong_code_between_hilltops(hilltop: Callable[..., Peer], fresh_code: str) -> None:
    s = hilltop("send", "--text", "secret", "--code", fresh_code)
    s.wait_for_code()
    r = hilltop("receive", f"{fresh_code.split('-')[0]}-{WRONG_WORDS}")
    sent, received = s.finish(), r.finish()
    assert_clean_failure(sent, "wrong code")
    assert_clean_failure(received, "wrong code")
    assert "secret" not in received.stdout


@pytest.mark.parametrize("command", ["send", "receive"])
def test_unreachable_relay(hilltop: Callable[..., Peer], command: str) -> None:
    """Nothing listens at the relay URL: one error line, quickly, no traceback, naming the
    URL and why (official 0.24 names both: "relay URL was ...", "Connection was refused")."""
    dead = f"ws://127.0.0.1:{free_port()}/v1"
    args = ["send", "--text", "x"] if command == "send" else ["receive", "7-guitarist-revenge"]
    result = hilltop(*args, relay_url=dead, transit_helper="tcp:127.0.0.1:9").finish(30)
    assert_clean_failure(result, f"cannot reach the mailbox server {dead}: ", "refused")


@pytest.mark.parametrize("command", ["send", "receive"])
def test_misspelt_transport_fails_before_the_mailbox(hilltop: Callable[..., Peer],
                                                     command: str, tmp_path) -> None:
    """A typo in --transports is reported at once, not after the peer has typed the code."""
    dead = f"ws://127.0.0.1:{free_port()}/v1"  # never reached: the name is checked first
    (tmp_path / "f.txt").write_text("x")
    args = (["send", str(tmp_path / "f.txt")] if command == "send"
            else ["receive", "7-guitarist-revenge"])
    result = hilltop(*args, "--transports", "relya", relay_url=dead,
                     transit_helper="tcp:127.0.0.1:9").finish(30)
    assert_clean_failure(result, "unknown transport(s) relya")


@pytest.mark.parametrize("code", ["banana", "7", "7-", "guitarist-revenge", "7-guitarist revenge",
                                  "7--revenge"])
def test_malformed_code_on_receive(hilltop: Callable[..., Peer], code: str) -> None:
    dead = f"ws://127.0.0.1:{free_port()}/v1"  # refused before any connection matters
    result = hilltop("receive", code, relay_url=dead, transit_helper="tcp:127.0.0.1:9").finish(30)
    assert_clean_failure(result, "code")


@pytest.mark.parametrize("code", ["banana", "7-guitarist revenge"])
def test_malformed_code_on_send(hilltop: Callable[..., Peer], code: str) -> None:
    dead = f"ws://127.0.0.1:{free_port()}/v1"
    result = hilltop("send", "--text", "x", "--code", code, relay_url=dead,
                     transit_helper="tcp:127.0.0.1:9").finish(30)
    assert_clean_failure(result, "code")
    assert result.returncode == 2, result.describe()
    assert "Sending" not in result.stderr, result.describe()  # refused before announcing


@pytest.mark.parametrize(("sender", "text"), [
    ("hilltop", "abc"),
    ("hilltop", "ends in a newline\n"),
    pytest.param("official", "two lines\nand a blank one\n\n", marks=interop),
])
def test_text_into_a_pipe_is_exactly_what_was_sent(peers: Peers, fresh_code: str,
                                                   sender: str, text: str) -> None:
    """``printf abc | wormhole send --text -`` into ``wormhole receive CODE > f`` stores
    ``abc``: nothing added, nothing escaped (it used to gain a newline, and a text ending in
    one got a second)."""
    s: Peer = getattr(peers, sender)("send", "--code", fresh_code, "--text", "-", stdin=text)
    received = peers.hilltop("receive", fresh_code).finish()
    sent = s.finish()
    assert sent.returncode == 0 and received.returncode == 0, received.describe()
    assert received.stdout == text, received.describe()


@interop
def test_a_receiver_that_went_first_says_it_waits(peers: Peers, fresh_code: str) -> None:
    """``receive CODE`` with no sender yet says "Waiting for sender..." (on stderr), as
    official 0.24 does 1 s after the code is set; hilltop used to print nothing."""
    receiver = peers.hilltop("receive", fresh_code)
    receiver.wait_for_line(r"^Waiting for sender\.\.\.$", 15)
    sent = peers.official("send", "--code", fresh_code, "--text", TEXT).finish()
    received = receiver.finish()
    assert_delivered(sent, received)
    assert received.stderr.count("Waiting for sender...") == 1, received.describe()


@interop
@pytest.mark.parametrize("sender", ["official", "hilltop"])
@pytest.mark.parametrize("given", [[], ["--text", ""]])
def test_send_with_nothing_to_send_asks_for_the_text(peers: Peers, sender: str,
                                                     given: list[str]) -> None:
    """``wormhole send`` alone (or with ``--text ''``) asks "Text to send:" and sends the line
    it reads, without its newline, as official 0.24 does (hilltop used to exit 2)."""
    s: Peer = getattr(peers, sender)("send", *given, stdin="typed at the prompt\n")
    code = s.wait_for_code()
    received = peers.official("receive", code).finish()
    sent = s.finish()
    assert_delivered(sent, received, "typed at the prompt")
    assert received.stdout == "typed at the prompt\n", received.describe()
    assert "Text to send: " in sent.stdout + sent.stderr, sent.describe()


def test_send_with_nothing_typed_fails_cleanly(hilltop: Callable[..., Peer]) -> None:
    """Ctrl-D at "Text to send:" (official 0.24: an EOFError traceback)."""
    dead = f"ws://127.0.0.1:{free_port()}/v1"  # never reached: nothing to send
    result = hilltop("send", stdin=b"", relay_url=dead,
                     transit_helper="tcp:127.0.0.1:9").finish(30)
    assert_clean_failure(result, "no text was entered")
    assert result.returncode == 1, result.describe()


@pytest.mark.parametrize("receiver", [
    pytest.param("official", marks=interop),
    "hilltop",
])
def test_dropped_websocket(peers: Peers, restartable_mailbox: MailboxServer, fresh_code: str,
                           receiver: str) -> None:
    """The mailbox dies while hilltop waits for its peer and comes back on the same port.

    The server keeps its state in a file, so the nameplate and the sender's stored PAKE message
    survive. hilltop must reconnect and finish the transfer, or at worst stop with one clean
    error line; hanging or a traceback fails.
    """
    url = restartable_mailbox.url
    s = peers.hilltop("send", "--text", TEXT, "--code", fresh_code, relay_url=url)
    s.wait_for_code()
    time.sleep(1.0)                   # let the PAKE message reach the server's database
    restartable_mailbox.kill()
    time.sleep(1.0)                   # hilltop sees the connection drop
    restartable_mailbox.start()
    r: Peer = getattr(peers, receiver)("receive", fresh_code, relay_url=url)

    deadline = time.monotonic() + 90
    while s.poll() is None and r.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if s.poll() not in (None, 0):     # the sender gave up: that must at least be clean
        r.kill()
        assert_clean_failure(s.finish(5))
        return
    assert_delivered(s.finish(30), r.finish(30))


def test_help_names_the_official_flags(hilltop: Callable[..., Peer]) -> None:
    dead = "ws://127.0.0.1:9/v1"
    top = hilltop("--help", flags=False, relay_url=dead, transit_helper="tcp:127.0.0.1:9")
    send = hilltop("send", "--help", flags=False, relay_url=dead,
                   transit_helper="tcp:127.0.0.1:9")
    top_out, send_out = top.finish(30), send.finish(30)
    assert top_out.returncode == 0 and send_out.returncode == 0, top_out.describe()
    for needle in ("--relay-url", "--appid", "WORMHOLE_RELAY_URL"):
        assert needle in top_out.stdout, top_out.describe()
    for needle in ("--code", "--code-length", "--text", "--verify", "--hide-progress"):
        assert needle in send_out.stdout, send_out.describe()
