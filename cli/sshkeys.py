"""SSH public keys for ``wormhole ssh``: which line may be sent, which may be added, and how.

Official 0.24 appends whatever text arrives to ``~/.ssh/authorized_keys`` (after ``strip()``).
A peer who knows the code can then add several lines, or one with options such as
``command="..."`` or ``from=...``, and a file without a final newline gets the key glued to
its last line. Here only one plain key line is accepted: a known key type, base64 whose
embedded type matches it, an optional printable comment, nothing else. The file is written
through a descriptor of the ``.ssh`` directory opened without following symlinks, appended
to (never rewritten), created 0600 in a directory created 0700, as sshd's StrictModes wants.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import stat
from pathlib import Path

from hilltop._values import value
from hilltop.errors import LocalError, RejectedError

KEY_TYPES = frozenset({
    "ssh-ed25519", "ssh-rsa", "ssh-dss",
    "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
})
"""The public key algorithms OpenSSH 9 accepts in authorized_keys (certificates excluded:
a ``*-cert-v01`` line needs a ``cert-authority`` option, which this never writes)."""

MAX_LINE = 16 * 1024
"""Bytes; an 16384-bit RSA key with a long comment is about 3 KB."""

_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_PRINTABLE_COMMENT = re.compile(r"[^\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                                r"\u2066-\u2069\u2028\u2029\ud800-\udfff]*")


@value
class PublicKey:
    """One line of an OpenSSH public key file, split into its three parts."""

    kind: str  # the key type, e.g. ssh-ed25519
    blob: str  # base64
    comment: str  # may be empty

    @property
    def keyid(self) -> str:
        """What official 0.24 calls the key: its comment, or ``unknown``."""
        return self.comment or "unknown"

    def line(self) -> str:
        return f"{self.kind} {self.blob} {self.comment}".rstrip()


def parse_public_key(text: str) -> PublicKey:
    """The one key line in ``text`` (surrounding whitespace allowed), or RejectedError."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_LINE:
        raise RejectedError(f"the SSH key is longer than {MAX_LINE} bytes; refusing it")
    line = text.strip()
    if not line:
        raise RejectedError("the SSH key is empty")
    if "\n" in line or "\r" in line:
        raise RejectedError("the SSH key has more than one line; refusing it "
                            "(only one plain key line is added)")
    parts = line.split(None, 2)
    if parts[0] not in KEY_TYPES:
        raise RejectedError(
            "the SSH key line does not start with a known key type (options such as "
            "command=... or from=... are refused)")
    if len(parts) < 2 or not _BASE64.fullmatch(parts[1]):
        raise RejectedError("the SSH key has no base64 key data after its type")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise RejectedError("the SSH key data is not valid base64") from None
    if len(blob) < 4 or blob[4:4 + int.from_bytes(blob[:4], "big")] != parts[0].encode():
        raise RejectedError("the SSH key data does not match its type "
                            f"{parts[0]!r}; refusing it")
    comment = parts[2].strip() if len(parts) == 3 else ""
    if not _PRINTABLE_COMMENT.fullmatch(comment):
        raise RejectedError("the SSH key comment has control characters; refusing it")
    return PublicKey(parts[0], parts[1], comment)


# --------------------------------------------------------------------------- the sender's side

def public_key_files(where: str | None) -> list[Path]:
    """The candidates ``ssh accept`` may send: ``-F`` as a ``.pub`` file, or every ``*.pub``
    in ``-F`` as a directory (official 0.24 takes only a directory there) or in ``~/.ssh``."""
    base = Path(where).expanduser() if where else Path("~/.ssh").expanduser()
    if where and base.is_file():
        return [base]
    if not base.is_dir():
        raise LocalError(f"can't find '{base}'")
    found = sorted(p for p in base.iterdir() if p.name.endswith(".pub") and p.is_file())
    if not found:
        raise LocalError(f"no public keys in '{base}'")
    return found


def read_public_key(path: Path) -> PublicKey:
    """The key in ``path``; refuses anything else, so a private key is never sent by mistake."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_LINE + 1)
    except OSError as err:
        raise LocalError(f"can't read '{path}': {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LocalError(f"'{path}' is not an SSH public key (not UTF-8 text)") from None
    try:
        return parse_public_key(text)
    except RejectedError as err:
        raise LocalError(f"'{path}' is not an SSH public key: {err}") from None


# --------------------------------------------------------------------------- the inviter's side

def ssh_dir(user: str | None) -> Path:
    """``~/.ssh`` of ``user`` (``--user``), or of whoever runs the command."""
    if user is None:
        return Path("~/.ssh").expanduser()
    import pwd

    try:
        return Path(pwd.getpwnam(user).pw_dir) / ".ssh"
    except KeyError:
        raise LocalError(f"no such user: {user!r}") from None


def check_writable(ssh_path: Path) -> list[str]:
    """Refuse before a code is made if the key could not be added; notes for the user."""
    notes: list[str] = []
    keys = ssh_path / "authorized_keys"
    for path, kind in ((ssh_path, "directory"), (keys, "file")):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            notes.append(f"Note: '{path}' not found; will be created")
            if kind == "directory":
                if not os.access(ssh_path.parent, os.W_OK | os.X_OK):
                    raise LocalError(f"can't create '{ssh_path}': no write permission on "
                                     f"'{ssh_path.parent}'") from None
                break
            continue
        if stat.S_ISLNK(st.st_mode):
            raise LocalError(f"'{path}' is a symbolic link; refusing to write through it")
        wanted = stat.S_ISDIR if kind == "directory" else stat.S_ISREG
        if not wanted(st.st_mode):
            raise LocalError(f"'{path}' is not a {kind}")
        if not os.access(path, os.W_OK | (os.X_OK if kind == "directory" else 0)):
            raise LocalError(f"no write permission on '{path}'")
    return notes


def append_key(ssh_path: Path, key: PublicKey, owner: str | None = None) -> str | None:
    """Append ``key`` to ``authorized_keys`` in ``ssh_path``. Returns None when it was
    appended, else the options of the line that already holds it (``""`` for a plain line):
    that line is kept as it is (see :func:`existing_options`).

    Never follows a symlink (the directory and the file are opened with ``O_NOFOLLOW``, the
    file relative to the directory's descriptor), never rewrites what is there, starts a new
    line if the file did not end with one, and gives what it creates modes 0700/0600 (and,
    when root adds a key for ``--user``, that user as owner).
    """
    created_dir = False
    try:
        os.mkdir(ssh_path, 0o700)
        created_dir = True
    except FileExistsError:
        pass
    except OSError as err:
        raise LocalError(f"can't create '{ssh_path}': {err.strerror or err}") from None
    try:
        dir_fd = os.open(ssh_path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        raise LocalError(f"can't open '{ssh_path}' (a symbolic link is refused): "
                         f"{err.strerror or err}") from None
    try:
        if created_dir:
            os.fchmod(dir_fd, 0o700)  # whatever the umask said
            _give_to(dir_fd, owner)
        try:
            fd = os.open("authorized_keys", os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW,
                         dir_fd=dir_fd)
            created = False
        except FileNotFoundError:
            fd = os.open("authorized_keys",
                         os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o600, dir_fd=dir_fd)
            created = True
        except OSError as err:
            raise LocalError(f"can't open '{ssh_path / 'authorized_keys'}' (a symbolic link "
                             f"is refused): {err.strerror or err}") from None
        with contextlib.closing(_Fd(fd)):
            if created:
                os.fchmod(fd, 0o600)
                _give_to(fd, owner)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LocalError(f"'{ssh_path / 'authorized_keys'}' is not a regular file")
            existing = _read_all(fd)
            options = existing_options(existing.decode("utf-8", "replace"), key)
            if options is not None:
                return options
            lead = b"\n" if existing and not existing.endswith(b"\n") else b""
            data = lead + key.line().encode("utf-8") + b"\n"
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        return None
    finally:
        os.close(dir_fd)


def existing_options(authorized_keys: str, key: PublicKey) -> str | None:
    """The options of the first line of ``authorized_keys`` that holds ``key`` (same type and
    key data, whatever the comment), ``""`` if that line has none; None if no line does.

    A line may start with options (``restrict,command="a b, c" ssh-ed25519 AAAA...``): a
    comma-separated field that ends at the first blank outside double quotes, as sshd reads
    it. Why the line found is kept, options and all: whoever wrote ``restrict``, ``from=`` or
    ``command=`` meant to limit that key, and the same key again on a plain line would lift
    the limit (sshd goes on to a later line for the key when, say, a ``from=`` refuses it).
    """
    wanted = _key_data(key.blob)
    for line in authorized_keys.splitlines():
        parsed = split_key_line(line)
        if parsed is not None and parsed[1] == key.kind and _key_data(parsed[2]) == wanted:
            return parsed[0]
    return None


def split_key_line(line: str) -> tuple[str, str, str] | None:
    """``(options, key type, base64 key data)`` of one authorized_keys line; None for a blank
    line, a comment, or a line that cannot be read (an unclosed quote, no key data)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    options = ""
    first = text.split(None, 1)[0]
    if first not in KEY_TYPES and not first.endswith("-cert-v01@openssh.com"):
        end = _options_end(text)
        if end is None:
            return None
        options, text = text[:end], text[end:]
    fields = text.split(None, 2)
    if len(fields) < 2:
        return None
    return options, fields[0], fields[1]


def _options_end(text: str) -> int | None:
    """Where the options field of ``text`` ends: the first blank outside double quotes (a
    backslash escapes a quote inside them); None if a quote is left open."""
    quoted = False
    i = 0
    while i < len(text):
        char = text[i]
        if quoted and char == "\\" and text[i + 1:i + 2] == '"':
            i += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char in " \t" and not quoted:
            return i
        i += 1
    return None


def _key_data(blob: str) -> bytes | str:
    """The key's bytes, so two spellings of one base64 compare equal (else the text)."""
    try:
        return base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return blob


class _Fd:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _give_to(fd: int, owner: str | None) -> None:
    """As root, make what we created for ``--user`` that user's (sshd wants it so)."""
    if owner is None or os.geteuid() != 0:
        return
    import pwd

    entry = pwd.getpwnam(owner)
    os.fchown(fd, entry.pw_uid, entry.pw_gid)
