# The conformance kit's fixtures (transit_relay and friends) for this package's tests.
pytest_plugins = ["hilltop.testing"]
