"""Hypothesis profiles for the whole unit suite.

``small`` keeps local runs fast; ``ci`` is what ``.ci/run`` selects through
``HILLTOP_HYPOTHESIS_PROFILE=ci``: 10,000 examples for each parser fuzz test
(``tests/core/test_fuzz_parsers.py`` takes its settings from the profile; other hypothesis tests
keep the sizes they chose). No deadline: CI machines are shared and a slow example is not a bug.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("small", max_examples=200, deadline=None)
settings.register_profile(
    "ci", max_examples=10_000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
