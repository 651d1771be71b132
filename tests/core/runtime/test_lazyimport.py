"""The CLI leaves ``http.cookiejar`` (and with it urllib.request, http.client, email, ssl)
unloaded until something uses it; Twisted's compat module only re-exports it. Likewise
``hyperlink``, which autobahn imports with a plain ``import hyperlink``.

Run in a fresh interpreter: what is loaded depends on the process's first imports.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fresh_interpreter import run_fresh

PROBE = textwrap.dedent("""
    import sys
    import hilltop.cli.main  # the CLI's imports, Twisted's among them
    from hilltop.rendezvous import client
    client._autobahn()  # what the first mailbox connection adds
    print("urllib.request loaded:", "urllib.request" in sys.modules)
    print("hyperlink run:", type(sys.modules["hyperlink"]) is type(sys))
    import hyperlink  # a plain import binds the deferred module without running it
    print("hyperlink run after import:", type(sys.modules["hyperlink"]) is type(sys))
    print("url host:", hyperlink.URL.from_text("ws://relay.example:4000/v1").host)
    from twisted.python import compat
    import http.cookiejar
    jar = http.cookiejar.CookieJar()  # the first use loads the real module
    print("cookie jar:", type(jar).__name__, len(jar))
    print("urllib.request after use:", "urllib.request" in sys.modules)
""")


def test_the_cli_loads_the_cookie_jar_only_when_used() -> None:
    lines = dict(line.split(": ", 1) for line in run_fresh(PROBE).splitlines())
    assert lines["urllib.request loaded"] == "False"
    assert lines["cookie jar"] == "CookieJar 0"
    assert lines["urllib.request after use"] == "True"


def test_a_plain_import_leaves_a_deferred_module_unrun_until_used() -> None:
    lines = dict(line.split(": ", 1) for line in run_fresh(PROBE).splitlines())
    assert lines["hyperlink run"] == "False"
    assert lines["hyperlink run after import"] == "False"
    assert lines["url host"] == "relay.example"


def test_a_deferred_module_runs_once_whoever_uses_it_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a package whose __init__ imports its submodule: deferring the submodule must not run the
    # package first (find_spec would), and threads using it at once run its code once
    package = tmp_path / "deferred_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import heavy\n")
    (package / "heavy.py").write_text(
        "import builtins\n"
        "builtins.heavy_runs = getattr(builtins, 'heavy_runs', 0) + 1\n"
        "VALUE = 42\n")
    script = textwrap.dedent("""
        import builtins, sys, threading
        from hilltop._runtime.lazyimport import defer_module
        defer_module("deferred_probe_pkg.heavy")
        import deferred_probe_pkg
        print("runs after import:", getattr(builtins, "heavy_runs", 0))
        seen = []
        threads = [threading.Thread(target=lambda: seen.append(deferred_probe_pkg.heavy.VALUE))
                   for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        print("values:", sorted(set(seen)), len(seen))
        print("runs after use:", builtins.heavy_runs)
    """)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    lines = dict(line.split(": ", 1) for line in run_fresh(script).splitlines())
    assert lines["runs after import"] == "0"
    assert lines["values"] == "[42] 8"
    assert lines["runs after use"] == "1"
