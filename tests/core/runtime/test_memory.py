"""The collector around import batches (:func:`hilltop._runtime.memory.importing`): the CLI's
only; a library's host keeps its own collector settings."""

from __future__ import annotations

import gc

from hilltop._runtime import memory


def test_importing_leaves_a_hosts_collector_alone() -> None:
    assert not memory.frozen_at_startup()  # the test process is a library host, not the CLI
    frozen = gc.get_freeze_count()
    with memory.importing():
        assert gc.isenabled()
        kept = [object() for _ in range(10)]
    assert gc.isenabled() and gc.get_freeze_count() == frozen and kept
