"""A private Tor network on 127.0.0.1 for the ``--tor`` tests: 3 directory authorities, 2 relays
and client nodes, each a Debian ``tor`` with ``TestingTorNetwork 1`` and a fresh DataDirectory.

Every tor is told ``__OwningControllerProcess`` (the test runner), so it exits if the runner dies;
:meth:`TorNetwork.stop` kills them all by PID. Output goes to ``<dir>/<name>/tor.log``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from serverkit import free_port


@dataclass
class Node:
    name: str
    datadir: Path
    kind: str  # "authority", "relay" or "client"
    control: int = field(default_factory=free_port)
    orport: int = 0
    dirport: int = 0
    socks: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.datadir / "tor.log"

    @property
    def info_log(self) -> Path:
        return self.datadir / "info.log"

    @property
    def control_endpoint(self) -> str:
        return f"tcp:127.0.0.1:{self.control}"


class TorNetwork:
    def __init__(self, workdir: Path, tor: str = "tor", clients: int = 2) -> None:
        self.workdir = workdir
        self.tor = tor
        self.nodes: list[Node] = []
        self.dirauths: list[str] = []  # DirAuthority values, known once start() made the keys
        for i in range(3):
            self.nodes.append(Node(f"auth{i}", workdir / f"auth{i}", "authority",
                                   orport=free_port(), dirport=free_port()))
        for i in range(2):
            self.nodes.append(Node(f"relay{i}", workdir / f"relay{i}", "relay",
                                   orport=free_port()))
        for i in range(clients):
            self.nodes.append(Node(f"client{i}", workdir / f"client{i}", "client",
                                   socks=free_port()))

    @property
    def clients(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "client"]

    # -- setup ---------------------------------------------------------------------------------
    def _fingerprint(self, node: Node) -> str:
        out = subprocess.run(
            [self.tor, "--ignore-missing-torrc", "-f", "NONE", "--defaults-torrc", "NONE",
             "--datadirectory", str(node.datadir), "--orport", "1", "--list-fingerprint"],
            capture_output=True, text=True, timeout=60, check=True).stdout
        line = out.strip().splitlines()[-1]
        return "".join(line.split()[1:])

    def _authority_keys(self, node: Node) -> str:
        keys = node.datadir / "keys"
        keys.mkdir(mode=0o700, parents=True)
        subprocess.run(
            ["tor-gencert", "--create-identity-key", "--passphrase-fd", "0",
             "-i", str(keys / "authority_identity_key"), "-s", str(keys / "authority_signing_key"),
             "-c", str(keys / "authority_certificate"), "-m", "12",
             "-a", f"127.0.0.1:{node.dirport}"],
            input="\n", capture_output=True, text=True, timeout=60, check=True, cwd=keys)
        for line in (keys / "authority_certificate").read_text().splitlines():
            if line.startswith("fingerprint "):
                return line.split()[1]
        raise RuntimeError("tor-gencert wrote no fingerprint")

    def network_options(self) -> list[tuple[str, str]]:
        """The options every node needs to be part of this network (not per-node ports).

        Also what a ``tor`` wrapper adds so that ``txtorcon.launch`` (``--launch-tor``) joins
        this network (see :meth:`write_tor_wrapper`).
        """
        return [
            ("TestingTorNetwork", "1"),
            ("PathsNeededToBuildCircuits", "0.67"),
            ("TestingDirAuthVoteGuard", "*"),
            ("TestingDirAuthVoteHSDir", "*"),
            ("TestingDirAuthVoteExit", "*"),
            ("TestingMinExitFlagThreshold", "0"),
            ("V3AuthNIntervalsValid", "2"),
            ("AssumeReachable", "1"),
            # Tor learns its circuit build timeout from the circuits it has built: on loopback
            # that comes out near 50 ms, and a load spike on a shared 2-core machine then times
            # out a service's rendezvous circuit twice, after which Tor gives up on that
            # introduction while the client (already INTRODUCE_ACKed) waits for its SOCKS
            # timeout. The official receiver dials our onion once, so that failed the test.
            # A fixed, generous timeout is what a slow real network would give.
            ("LearnCircuitBuildTimeout", "0"),
            ("CircuitBuildTimeout", "60"),
            # Vanguards-lite pins onion circuits' second hop to a few "layer 2" relays chosen by
            # their flags. A young network under load flips Fast/Stable from one 10 s consensus
            # to the next, the set keeps being emptied of "unsuitable" relays, and a client was
            # seen never finishing bootstrap ("Failed to find node for hop #2"). With 5 relays
            # there is nothing for vanguards to protect.
            ("VanguardsLiteEnabled", "0"),
            *(("DirAuthority", line) for line in self.dirauths),
        ]

    def _torrc(self, node: Node) -> str:
        lines = [
            f"DataDirectory {node.datadir}",
            f"Nickname {node.name}",
            f"ControlPort 127.0.0.1:{node.control}",
            "CookieAuthentication 1",
            f"__OwningControllerProcess {os.getpid()}",
            f"Log notice file {node.log}",
            *(f"{key} {value}" for key, value in self.network_options()),
        ]
        if node.kind in ("authority", "relay"):
            lines += ["SocksPort 0", f"ORPort 127.0.0.1:{node.orport}", "Address 127.0.0.1",
                      "ExitRelay 0", "ExitPolicy reject *:*"]
        if node.kind == "authority":
            lines += [f"DirPort 127.0.0.1:{node.dirport}", "AuthoritativeDirectory 1",
                      "V3AuthoritativeDirectory 1", f"ContactInfo {node.name}@test",
                      "TestingV3AuthInitialVotingInterval 10", "V3AuthVotingInterval 10",
                      "TestingV3AuthInitialVoteDelay 2", "TestingV3AuthInitialDistDelay 2",
                      "V3AuthVoteDelay 2", "V3AuthDistDelay 2"]
        if node.kind == "client":
            # info-level logs of the clients explain a failed onion connection (rendezvous,
            # introduction) when a test fails; a few MB per run
            lines += [f"SocksPort 127.0.0.1:{node.socks}", f"Log info file {node.info_log}"]
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        dirauths = self.dirauths
        for node in self.nodes:
            node.datadir.mkdir(mode=0o700, parents=True)
        for node in self.nodes:
            if node.kind != "authority":
                continue
            v3ident = self._authority_keys(node)
            fpr = self._fingerprint(node)
            dirauths.append(f"{node.name} orport={node.orport} no-v2 "
                            f"v3ident={v3ident} 127.0.0.1:{node.dirport} {fpr}")
        for node in self.nodes:
            torrc = node.datadir / "torrc"
            torrc.write_text(self._torrc(node))
            out = open(node.datadir / "stdout.txt", "wb")  # noqa: SIM115
            node.proc = subprocess.Popen(
                [self.tor, "-f", str(torrc), "--defaults-torrc", "NONE"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            out.close()

    def wait_bootstrapped(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        for node in self.clients:
            while True:
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(f"{node.name} exited:\n{self.tail(node)}")
                if node.log.exists() and "Bootstrapped 100%" in node.log.read_text():
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{node.name} did not bootstrap:\n{self.tail(node)}")
                time.sleep(0.5)

    def tail(self, node: Node, lines: int = 30) -> str:
        text = node.log.read_text() if node.log.exists() else ""
        text += (node.datadir / "stdout.txt").read_text() \
            if (node.datadir / "stdout.txt").exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()
        for node in self.nodes:
            if node.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.proc.wait(10)

    def write_tor_wrapper(self, bindir: Path, record: Path) -> Path:
        """A ``tor`` for the front of ``PATH`` that joins whatever starts it to this network.

        ``txtorcon.launch`` (behind ``--launch-tor``) gives tor all its options on the command
        line; the wrapper appends :meth:`network_options` and execs the real tor, after noting
        its PID and arguments in ``record`` so a test can tell the launch went through it.
        """
        extra = " ".join(f"--{key} {shlex.quote(value)}" for key, value in self.network_options())
        script = bindir / "tor"
        script.write_text("#!/bin/sh\n"
                          f'echo "$$ $*" >> {shlex.quote(str(record))}\n'
                          f'exec {shlex.quote(self.tor)} "$@" {extra}\n')
        script.chmod(0o755)
        return script

    # -- control port --------------------------------------------------------------------------
    def control(self, node: Node, *commands: str) -> list[str]:
        """Authenticate with the cookie, run ``commands``, return the reply lines."""
        cookie = (node.datadir / "control_auth_cookie").read_bytes().hex()
        with socket.create_connection(("127.0.0.1", node.control), timeout=30) as s:
            f = s.makefile("rwb")
            replies = []
            for cmd in (f"AUTHENTICATE {cookie}", *commands):
                f.write(cmd.encode() + b"\r\n")
                f.flush()
                while True:
                    line = f.readline().decode().rstrip("\r\n")
                    if not line:
                        raise RuntimeError(f"tor closed the control connection after {cmd!r}")
                    replies.append(line)
                    if not line.startswith("250") and not line.startswith("5"):
                        continue
                    if line[3] == " ":
                        break
                if replies[-1].startswith("5"):
                    raise RuntimeError(f"{cmd!r}: {replies[-1]}")
            return replies

    def publish(self, node: Node, local_port: int, virtual_port: int = 80) -> str:
        """An onion service (detached, key discarded) for 127.0.0.1:local_port; its hostname."""
        lines = self.control(node, "ADD_ONION NEW:ED25519-V3 Flags=DiscardPK,Detach "
                                   f"Port={virtual_port},127.0.0.1:{local_port}")
        for line in lines:
            if line.startswith("250-ServiceID="):
                return line.split("=", 1)[1] + ".onion"
        raise RuntimeError(f"ADD_ONION gave no ServiceID: {lines}")

    def wait_reachable(self, node: Node, onion: str, port: int, timeout: float = 60.0) -> None:
        """Retry a SOCKS5 connect through ``node`` until the onion service answers."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", node.socks), timeout=30) as s:
                    s.sendall(b"\x05\x01\x00")
                    if s.recv(2) != b"\x05\x00":
                        raise OSError("SOCKS greeting refused")
                    name = onion.encode()
                    s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name
                              + port.to_bytes(2, "big"))
                    reply = s.recv(10)
                    if len(reply) >= 2 and reply[1] == 0:
                        return
                    last = f"SOCKS reply {reply[1] if len(reply) > 1 else '?'}"
            except OSError as exc:
                last = str(exc)
            time.sleep(1)
        raise RuntimeError(f"{onion}:{port} never became reachable through Tor: {last}")
