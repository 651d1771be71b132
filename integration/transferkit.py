"""What the tests that move real bytes share: random files and their digest, and a
throttling proxy that counts the bytes crossing it (in front of a transit relay).

Kept out of the test modules so that ``test_resume.py``, the fault tests and
``official_faults.py`` import a kit, not each other.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
import time
from pathlib import Path


class CountingProxy:
    """Forwards each connection to ``target``; counts and throttles the client's bytes."""

    def __init__(self, target: tuple[str, int], rate: float) -> None:
        self.target = target
        self.rate = rate
        self.upstream = 0  # bytes clients sent through us (the sender's data is most of it)
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def hint(self) -> str:
        return f"tcp:127.0.0.1:{self.port}"

    def reset(self) -> int:
        with self._lock:
            seen, self.upstream = self.upstream, 0
        return seen

    def close(self) -> None:
        """Drop every connection now, as a relay that dies would.

        ``shutdown`` first: on Linux, ``close`` from this thread neither wakes a thread blocked
        in ``accept``/``recv``/``sendall`` on that socket nor sends the FIN while that call
        holds it, so peers and pipe threads waited on a proxy that was already "closed"."""
        self._closed = True
        with self._lock:
            socks, self._socks = [self._listener, *self._socks], []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:  # the target is gone (a killed relay): refuse this client too
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close()
                    server.close()
                    return
                self._socks += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False),
                             daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, counted: bool) -> None:
        due = time.monotonic()  # when the bytes so far may have gone; idle time is no credit
        try:
            while data := src.recv(256 * 1024):
                dst.sendall(data)
                if counted:
                    with self._lock:
                        self.upstream += len(data)
                now = time.monotonic()
                due = max(due, now) + len(data) / self.rate
                if due > now:
                    time.sleep(due - now)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


def random_file(path: Path, size: int) -> Path:
    """``size`` random bytes (a sparse file would prove little about which bytes went)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left:
            chunk = os.urandom(min(left, 1 << 20))
            f.write(chunk)
            left -= len(chunk)
    return path


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
