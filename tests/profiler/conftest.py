"""Profiler tests on SQLite and MariaDB (the store suite's fixtures: the MariaDB half FAILS
without a server); each test starts from empty tables of its module's database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from andreas.store import Store
from tests.store.conftest import backend, db_url, emptied, store  # noqa: F401  (fixtures)


@pytest.fixture
def pstore(store: Store) -> Iterator[Store]:
    """The module's store with every table emptied first."""
    yield emptied(store)
