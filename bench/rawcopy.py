"""The floor for a file over loopback: ``sendfile`` -> ``recv_into`` -> ``write``, no crypto,
no protocol, no rendezvous. ``bench/run.py`` times it beside the wormhole pairs, as two
processes launched and reaped like theirs, so "hilltop / raw" says how much of a transfer is
the protocol's and how much is Python and the kernel moving bytes.

    python bench/rawcopy.py recv PORT DEST [--fsync]    # listens on 127.0.0.1:PORT
    python bench/rawcopy.py send PORT FILE              # dials until the receiver listens

``--fsync`` makes the receiver sync the file before it exits (hilltop does before it acks;
official 0.24 does not) and print the seconds that took on stderr.
"""

from __future__ import annotations

import os
import socket
import sys
import time

BUFFER = 1 << 20
DIAL_FOR = 20.0


def receive(port: int, dest: str, sync: bool) -> None:
    with socket.create_server(("127.0.0.1", port)) as server:
        conn, _ = server.accept()
    buf = bytearray(BUFFER)
    view = memoryview(buf)
    with conn, open(dest, "wb", buffering=0) as f:
        while n := conn.recv_into(buf):
            f.write(view[:n])
        if sync:
            began = time.monotonic()
            os.fsync(f.fileno())
            print(f"fsync {time.monotonic() - began:.3f} s", file=sys.stderr)


def send(port: int, path: str) -> None:
    deadline = time.monotonic() + DIAL_FOR
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise SystemExit(f"no receiver on port {port} within {DIAL_FOR:g} s") from None
            time.sleep(0.005)
    with conn, open(path, "rb") as f:
        size, sent = os.fstat(f.fileno()).st_size, 0
        while sent < size:
            sent += os.sendfile(conn.fileno(), f.fileno(), sent, size - sent)


def main(argv: list[str]) -> None:
    if len(argv) >= 3 and argv[0] == "recv":
        receive(int(argv[1]), argv[2], "--fsync" in argv[3:])
    elif len(argv) == 3 and argv[0] == "send":
        send(int(argv[1]), argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
