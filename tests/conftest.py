"""Markers by what a test needs, so there is a quick loop without services.

- ``mariadb``: runs against the private MariaDB of ``scripts/test.sh`` (the store's
  ``backend`` fixture with its ``mariadb`` parameter, and modules that drive a server);
- ``docker``: needs the test Docker daemon (any test using the ``docker_client`` fixture);
- ``prometheus``: a real Prometheus server scrapes the daemons (any test using the
  ``prometheus`` fixture of tests/metrics/conftest.py);
- ``slurm``: runs against the real Slurm test cluster (any test using the
  ``slurm_cluster`` fixture; scripts/slurm-test-cluster.sh, started once per session);
- ``e2e``: the whole cluster (tests/e2e, minutes);
- ``slow``: tests that need no service but take seconds each (measured with
  ``--durations``), marked where they are: ``pytestmark`` for whole modules of exact
  solvers and property sweeps, ``@pytest.mark.slow`` on single tests.

Quick loop: ``pytest -m "not mariadb and not docker and not prometheus and not slurm and not
e2e and not slow"``.
``scripts/test.sh`` runs everything and fails on any skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm_cluster import SlurmCluster, session_cluster

_HERE = Path(__file__).parent
_MARIADB_MODULES = {"test_spool_mariadb_outage.py", "test_privileges.py", "test_ownership.py",
                    "test_lease_privileges.py", "test_readme_mariadb.py"}


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
        if "prometheus" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.prometheus)
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """The Slurm test cluster (tests/slurm_cluster.py): scripts/test.sh's, else one of this
    session's own."""
    cluster, private = session_cluster()
    try:
        yield cluster
    finally:
        if private is not None:
            private.close()
