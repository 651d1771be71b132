"""How to add an optional extra (``webrtc``) to the hilltop that is running, as the user got it.

hilltop is not on the package index, so ``pip install 'hilltop[webrtc]'`` finds nothing (or,
worse, whatever someone registers under that name). The way to add an extra is to install the
same source again with it: the checkout (``-e`` if it was editable), the wheel file, or the URL
pip recorded in the installation's ``direct_url.json`` (PEP 610), with the interpreter that runs
this hilltop so the extra lands in the same environment.
"""

from __future__ import annotations

import json
import shlex
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

from hilltop._values import value


@value
class Origin:
    """Where this installation came from, as pip recorded it."""

    url: str  # file:///checkout, file:///dist/hilltop-0.1.0-py3-none-any.whl, https://...
    editable: bool = False
    vcs: str | None = None  # "git" for a VCS install
    commit: str | None = None


def install_origin(dist_name: str = "hilltop") -> Origin | None:
    """The recorded origin of the installed distribution, or None (not installed by pip from a
    direct reference: then nothing says where it came from)."""
    for dist in metadata.distributions(name=dist_name):  # a stray egg-info may come first
        text = dist.read_text("direct_url.json")
        if not text:
            continue
        try:
            record = json.loads(text)
            vcs = record.get("vcs_info") or {}
            return Origin(url=str(record["url"]),
                          editable=bool((record.get("dir_info") or {}).get("editable")),
                          vcs=vcs.get("vcs"), commit=vcs.get("commit_id"))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
    return None


def add_extra_command(extra: str, origin: Origin | None) -> str:
    """The command that reinstalls ``origin`` with ``extra``; a template when it is unknown."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    if origin is None:
        return f"{pip} -e 'CHECKOUT[{extra}]' (or 'hilltop-VERSION-py3-none-any.whl[{extra}]')"
    parts = urlsplit(origin.url)
    if parts.scheme == "file" and origin.vcs is None:
        path = unquote(parts.path)
        if Path(path).exists():
            return f"{pip} {'-e ' if origin.editable else ''}{shlex.quote(f'{path}[{extra}]')}"
        return (f"{pip} 'PATH[{extra}]' with PATH where hilltop was installed from "
                f"({path} is gone)")
    reference = f"{origin.vcs}+{origin.url}" if origin.vcs else origin.url
    if origin.vcs and origin.commit:
        reference += f"@{origin.commit}"
    return f"{pip} {shlex.quote(f'hilltop[{extra}] @ {reference}')}"


def how_to_add(extra: str) -> str:
    """:func:`add_extra_command` for the running installation."""
    return add_extra_command(extra, install_origin())
