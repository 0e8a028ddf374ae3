"""Markers by what a test needs, so there is a quick loop without services.

- ``mariadb``: runs against the private MariaDB of ``scripts/test.sh`` (the store's
  ``backend`` fixture with its ``mariadb`` parameter, and modules that drive a server);
- ``docker``: needs the test Docker daemon (any test using the ``docker_client`` fixture);
- ``e2e``: the whole cluster (tests/e2e, minutes);
- ``slow``: pure tests that take seconds each (set in the modules themselves).

Quick loop: ``pytest -m "not mariadb and not docker and not e2e and not slow"``.
``scripts/test.sh`` runs everything and fails on any skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent
_MARIADB_MODULES = {"test_spool_mariadb_outage.py", "test_privileges.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        parts = path.relative_to(_HERE).parts
        params = getattr(getattr(item, "callspec", None), "params", {})
        if parts[0] == "e2e":
            item.add_marker(pytest.mark.e2e)
        if params.get("backend") == "mariadb" or path.name in _MARIADB_MODULES:
            item.add_marker(pytest.mark.mariadb)
        if "docker_client" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)
