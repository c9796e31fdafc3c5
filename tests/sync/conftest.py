"""Fixtures of the sync tests."""

from __future__ import annotations

import pytest

from sync_support import Slices, make_slices


@pytest.fixture(scope="session")
def slices(tmp_path_factory) -> Slices:
    return make_slices(tmp_path_factory.mktemp("slices"))
