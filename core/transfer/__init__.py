"""File-transfer v1: offers, where received files go, sources, sinks and zips."""
