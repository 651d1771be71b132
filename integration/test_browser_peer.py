"""The browser peer: hilltop's page in Debian's headless Chromium, against real CLI peers.

The lab (:mod:`browserlab`): command-line peers in namespace ``a``, Chromium in ``b``, the
official mailbox between them; no ICE server anywhere. Every namespace and process is removed
(by PID) at the end of each test.

Screenshots go to ``$HILLTOP_SHOTS`` when that is set (the closing note's pictures).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from browserlab import (
    BIG,
    DEFAULT_MAILBOX,
    MAILBOX,
    BrowserLab,
    missing_tools,
    page_code,
    page_end,
    sha256,
)
from nsproc import Proc, hilltop_command

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="the browser tests build network namespaces: they need root and iproute2")


@pytest.fixture
def lab(tmp_path: Path, peers_venv: Path) -> Iterator[BrowserLab]:
    if missing := missing_tools():
        pytest.fail(f"missing for the browser tests: {', '.join(missing)} (.ci/run installs "
                    "them)", pytrace=False)
    lab = BrowserLab(tmp_path, peers_venv / "bin" / "twist")
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


def send_browser(lab: BrowserLab, *args: str, cwd: Path | None = None) -> tuple[Proc, str]:
    sender = lab.run("a", "send", [*hilltop_command(), "--relay-url", MAILBOX, "send",
                                   "--browser", "--hide-progress", *args], cwd=cwd)
    url = sender.wait_for(r"(http://198\.18\.0\.11:\d+/#\S+)").group(1)
    return sender, url


def test_page_receives_50mb_from_send_browser(lab: BrowserLab, tmp_path: Path) -> None:
    data = tmp_path / "big.bin"
    data.write_bytes(os.urandom(BIG))
    sender, url = send_browser(lab, str(data))
    assert "code=" in url.split("#", 1)[1] and "code" not in url.split("#", 1)[0]
    downloads = tmp_path / "downloads"
    # a secure context (as https or localhost would be) lets the page stream to disk
    origin = url.split("/#")[0]
    page = lab.browser("file-in", "--url", url, "--downloads", str(downloads),
                       "--secure-origin", origin)
    end = page_end(page)
    assert end["state"] == "done", page.describe() + "\n" + sender.describe()
    assert "streamed to disk" in end["result"]
    assert end["heap_peak_mb"] < 30, end  # the file never sits in the page's memory
    assert sender.finish(60) == 0, sender.describe()
    assert end["download"] == "big.bin"
    assert end["sha256"] == sha256(data) == sha256(downloads / "big.bin")
    assert "webrtc" in sender.stderr
    print(f"page received {BIG / 1e6:.0f} MB: {end['result']}; "
          f"page heap peak {end['heap_peak_mb']} MB")
    print(sender.stderr)


def test_page_sends_50mb_to_receive(lab: BrowserLab, tmp_path: Path) -> None:
    data = tmp_path / "upload.bin"
    data.write_bytes(os.urandom(BIG))
    page = lab.browser("file-out", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--send-file", str(data))
    code = page_code(page)
    out = tmp_path / "got"
    out.mkdir()
    receiver = lab.run("a", "recv", [*hilltop_command(), "--relay-url", MAILBOX, "receive",
                                     "--accept-file", "--hide-progress", code], cwd=out)
    end = page_end(page)
    assert receiver.finish(60) == 0, receiver.describe()
    assert end["state"] == "done", page.describe()
    assert sha256(out / "upload.bin") == sha256(data) == end["sha256"]
    assert "webrtc" in receiver.stderr
    print(f"page sent {BIG / 1e6:.0f} MB: {end['result']}")


def test_text_from_official_to_the_page(lab: BrowserLab, peers_venv: Path) -> None:
    text = "from official 0.24: ünïcode ✓"
    official = lab.run("a", "official", [str(peers_venv / "bin" / "wormhole"), "--relay-url",
                                         MAILBOX, "send", "--text", text])
    code = official.wait_for(r"Wormhole code is: (\S+)").group(1)
    page = lab.browser("text-in", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--code", code)
    end = page_end(page)
    assert end["state"] == "done" and end["text"] == text, page.describe()
    assert official.finish(30) == 0, official.describe()


def test_text_from_the_page_to_official(lab: BrowserLab, peers_venv: Path) -> None:
    text = "from the browser: ünïcode ✓"
    page = lab.browser("text-out", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--send-text", text)
    code = page_code(page)
    official = lab.run("a", "official", [str(peers_venv / "bin" / "wormhole"), "--relay-url",
                                         MAILBOX, "receive", code])
    assert official.finish(30) == 0, official.describe()
    assert text in official.stdout
    assert page_end(page)["state"] == "done", page.describe()


def test_official_file_sender_is_told_the_page_needs_webrtc(lab: BrowserLab, tmp_path: Path,
                                                            peers_venv: Path) -> None:
    data = tmp_path / "f.txt"
    data.write_text("official cannot reach a browser\n")
    official = lab.run("a", "official", [str(peers_venv / "bin" / "wormhole"), "--relay-url",
                                         MAILBOX, "send", str(data)])
    code = official.wait_for(r"Wormhole code is: (\S+)").group(1)
    page = lab.browser("needs-webrtc", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--code", code)
    end = page_end(page)
    assert end["state"] == "error"
    assert "no WebRTC transport" in end["error"] and "its webrtc extra" in end["error"]
    assert official.finish(30) != 0
    assert "a browser can receive files only over WebRTC" in official.output


def test_wrong_code_fails_on_both_sides(lab: BrowserLab, tmp_path: Path) -> None:
    # the page receives with a wrong code: both sides say so
    sender, url = send_browser(lab, "--text", "never delivered")
    code = sender.wait_for(r"Wormhole code is: (\S+)").group(1)
    wrong = code.split("-")[0] + "-wrong-words"
    page = lab.browser("wrong-in", "--url", url.replace(f"code={code}", f"code={wrong}"))
    end = page_end(page)
    assert end["state"] == "error" and "code is wrong" in end["error"], page.describe()
    assert sender.finish(30) != 0
    assert "wrong code" in sender.stderr
    # the page sends, the receiver types a wrong code
    page = lab.browser("wrong-out", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--send-text", "never delivered either")
    code = page_code(page)
    receiver = lab.run("a", "recv-wrong", [*hilltop_command(), "--relay-url", MAILBOX,
                                           "receive", code.split("-")[0] + "-wrong-words"])
    assert receiver.finish(30) != 0
    assert "wrong code" in receiver.stderr
    end = page_end(page)
    assert end["state"] == "error" and "code is wrong" in end["error"], page.describe()


def test_lan_mode_serves_page_and_mailbox(lab: BrowserLab, tmp_path: Path) -> None:
    data = tmp_path / "lan.bin"
    data.write_bytes(os.urandom(3_000_000))
    sender = lab.run("a", "send-lan", [*hilltop_command(), "send", "--lan", "--browser",
                                       "--hide-progress", str(data)])
    url = sender.wait_for(r"(http://198\.18\.0\.11:\d+/#\S+)").group(1)
    assert "mailbox=ws://198.18.0.11:" in url  # the in-process mailbox, on the page's address
    downloads = tmp_path / "downloads"
    page = lab.browser("lan-in", "--url", url, "--downloads", str(downloads))
    end = page_end(page)
    assert end["state"] == "done", page.describe() + "\n" + sender.describe()
    assert "blob" in end["result"]  # plain http on a LAN address: not a secure context
    assert sender.finish(60) == 0, sender.describe()
    assert sha256(downloads / "lan.bin") == sha256(data)


def test_a_folder_arrives_as_its_zip(lab: BrowserLab, tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    (folder / "inner").mkdir(parents=True)
    (folder / "a.txt").write_text("first\n")
    (folder / "inner" / "b.bin").write_bytes(os.urandom(200_000))
    sender, url = send_browser(lab, str(folder))
    downloads = tmp_path / "downloads"
    page = lab.browser("folder-in", "--url", url, "--downloads", str(downloads))
    end = page_end(page)
    assert end["state"] == "done", page.describe() + "\n" + sender.describe()
    assert sender.finish(60) == 0, sender.describe()
    with zipfile.ZipFile(downloads / "photos.zip") as z:
        assert z.read("a.txt") == b"first\n"
        assert z.read("inner/b.bin") == (folder / "inner" / "b.bin").read_bytes()


def test_declining_on_the_page_tells_the_sender(lab: BrowserLab, tmp_path: Path) -> None:
    data = tmp_path / "unwanted.bin"
    data.write_bytes(b"x" * 1000)
    sender, url = send_browser(lab, str(data))
    page = lab.browser("decline", "--url", url, "--no-accept")
    end = page_end(page)
    assert end["state"] == "done" and end["status"] == "Declined.", page.describe()
    assert sender.finish(60) != 0
    assert "transfer rejected" in sender.stderr


@pytest.mark.skipif(shutil.which("turnserver") is None,
                    reason="needs Debian's coturn (apt-get install coturn; .ci/run installs it)")
def test_turn_settings_reach_the_page(lab: BrowserLab, tmp_path: Path) -> None:
    """--turn and --webrtc-relay-only are passed to the page: both ends relay through TURN."""
    turn, user, password = lab.start_turn()
    data = tmp_path / "relayed.bin"
    data.write_bytes(os.urandom(2_000_000))
    sender, url = send_browser(lab, "--turn", turn, "--turn-user", user, "--turn-password",
                               password, "--webrtc-relay-only", str(data))
    assert "relay-only=1" in url and "turn-user=lab" in url
    downloads = tmp_path / "downloads"
    page = lab.browser("turn-in", "--url", url, "--downloads", str(downloads))
    end = page_end(page)
    assert end["state"] == "done", page.describe() + "\n" + sender.describe()
    assert sender.finish(60) == 0, sender.describe()
    assert "via webrtc relay->" in end["result"]  # the page's own candidate: its TURN relay
    assert "(webrtc relay->" in sender.stderr
    assert sha256(downloads / "relayed.bin") == sha256(data)


def test_default_mailbox_needs_no_flag(lab: BrowserLab) -> None:
    """No --relay-url: the URL names the official default mailbox (here the lab's, by name)."""
    sender = lab.run("a", "send-default", [*hilltop_command(), "send", "--browser",
                                           "--text", "over the default mailbox"])
    url = sender.wait_for(r"(http://198\.18\.0\.11:\d+/#\S+)").group(1)
    assert f"mailbox={DEFAULT_MAILBOX}" in url
    page = lab.browser("default-mailbox", "--url", url)
    end = page_end(page)
    assert end["state"] == "done" and end["text"] == "over the default mailbox", page.describe()
    assert sender.finish(30) == 0, sender.describe()


def test_official_file_receiver_is_told_the_page_needs_webrtc(lab: BrowserLab, tmp_path: Path,
                                                              peers_venv: Path) -> None:
    data = tmp_path / "for-official.bin"
    data.write_bytes(b"y" * 1000)
    page = lab.browser("needs-webrtc-out", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--send-file", str(data))
    code = page_code(page)
    official = lab.run("a", "official-recv", [str(peers_venv / "bin" / "wormhole"),
                                              "--relay-url", MAILBOX, "receive",
                                              "--accept-file", code])
    end = page_end(page)
    assert end["state"] == "error"
    assert "the receiver has no WebRTC transport" in end["error"], end
    assert official.finish(30) != 0
    assert "a browser can send files only over WebRTC" in official.output
    assert not list((tmp_path / "official-recv").glob("for-official*"))


def test_an_unreachable_mailbox_is_said_plainly(lab: BrowserLab) -> None:
    page = lab.browser("no-mailbox", "--url", lab.static_host()
                       + "#code=5-some-words&mailbox=ws://198.18.0.1:4999/v1")
    end = page_end(page)
    assert end["state"] == "error"
    assert "cannot reach the mailbox server ws://198.18.0.1:4999/v1" in end["error"], end


def test_several_files_arrive_as_one_zip(lab: BrowserLab, tmp_path: Path) -> None:
    """The page lists no files-v1, so `send --browser a b` sends it one folder, as to official."""
    (tmp_path / "one.txt").write_text("one\n")
    (tmp_path / "two.txt").write_text("two\n")
    sender, url = send_browser(lab, "one.txt", "two.txt", cwd=tmp_path)
    downloads = tmp_path / "downloads"
    page = lab.browser("several-in", "--url", url, "--downloads", str(downloads))
    end = page_end(page)
    assert end["state"] == "done", page.describe() + "\n" + sender.describe()
    assert sender.finish(60) == 0, sender.describe()
    (archive,) = downloads.glob("*.zip")
    with zipfile.ZipFile(archive) as z:
        assert sorted(n.rsplit("/", 1)[-1] for n in z.namelist() if not n.endswith("/")) \
            == ["one.txt", "two.txt"]


def test_page_shows_the_same_verifier(lab: BrowserLab) -> None:
    """Both sides derive one key: the page's verifier is the one `--json` reports."""
    sender, url = send_browser(lab, "--json", "--text", "compare me")
    page = lab.browser("verifier", "--url", url)
    end = page_end(page)
    assert end["state"] == "done", page.describe() + "\n" + sender.describe()
    assert sender.finish(30) == 0, sender.describe()
    events = [json.loads(line) for line in sender.stdout.splitlines() if line.startswith("{")]
    (verifier,) = [e["verifier"] for e in events if e.get("event") == "verifier"]
    assert end["verifier"] == verifier and len(verifier) == 64


def test_page_reconnects_when_the_mailbox_restarts(lab: BrowserLab) -> None:
    """The page survives a mailbox restart after it got its code, as official clients do:
    it binds again with the same side, reopens the mailbox and resends what was not echoed."""
    page = lab.browser("reconnect", "--url", lab.static_host() + f"#mailbox={MAILBOX}",
                       "--send-text", "after a restart")
    code = page_code(page)
    (mailbox,) = [p for p in lab.procs if p.name == "mailbox"]
    mailbox.kill()
    lab.start_mailbox("mailbox-again")
    receiver = lab.run("a", "recv-after", [*hilltop_command(), "--relay-url", MAILBOX,
                                           "receive", code])
    assert receiver.finish(60) == 0, receiver.describe()
    assert "after a restart" in receiver.stdout
    end = page_end(page)
    assert end["state"] == "done", page.describe()
