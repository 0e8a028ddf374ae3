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

In parallel (scripts/test.sh: ``pytest -n 2 --dist loadgroup --no-loadscope-reorder``,
``ANDREAS_TEST_WORKERS`` sets the count) each test gets an ``xdist_group``: the tests of
one module stay on one worker (module fixtures, e2e scenarios that build on each other),
and the tests that share something one test may disturb are one group each: the Slurm
cluster (``slurm``), the test dockerd whose events and containers some tests watch
(``docker``: every module with a ``docker`` test), Prometheus (``prometheus``), and the
tests that stop their MariaDB (``mariadb-outage``, on a server of their own). The groups
that take minutes are sent first (``_FIRST``), so no worker starts one last.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.slurm_cluster import SlurmCluster, session_cluster

if TYPE_CHECKING:
    from tests.agents_daemon.mariadb_control import PrivateMariaDB

_HERE = Path(__file__).parent
_MARIADB_MODULES = {"test_spool_mariadb_outage.py", "test_privileges.py", "test_ownership.py",
                    "test_lease_privileges.py", "test_readme_mariadb.py"}


# The scheduler's order: these groups first (longest first, as measured with
# scripts/test-durations.py on scripts/test.sh's out/junit.xml), then the rest in
# collection order. A wrong entry costs time, never a test.
_FIRST = ("mariadb-outage", "slurm", "tests/e2e/test_end_to_end.py",
          "tests/e2e/test_power_end_to_end.py", "tests/e2e/test_fence_end_to_end.py",
          "tests/e2e/test_power_limits_end_to_end.py", "tests/e2e/test_sharing_end_to_end.py",
          "tests/e2e/test_profiling_end_to_end.py", "docker")


def _xdist_group(item: pytest.Item, module: str, docker_modules: set[str]) -> str:
    fixtures = getattr(item, "fixturenames", ())
    if "slurm_cluster" in fixtures:
        return "slurm"
    if "outage_mariadb" in fixtures:
        return "mariadb-outage"
    if module in docker_modules:
        return "docker"
    if "prometheus" in fixtures:
        return "prometheus"
    return module


def _group_for_workers(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist: each item's xdist_group, the long groups first."""
    if config.getoption("dist", "no") == "no" and not hasattr(config, "workerinput"):
        return
    modules = {item: Path(str(item.fspath)).relative_to(_HERE.parent).as_posix()
               for item in items}
    docker_modules = {modules[item] for item in items if item.get_closest_marker("docker")}
    rank = {name: i for i, name in enumerate(_FIRST)}
    groups = {}
    for item in items:
        groups[item] = _xdist_group(item, modules[item], docker_modules)
        item.add_marker(pytest.mark.xdist_group(groups[item]))
        _tag_group(item, groups[item])
    items.sort(key=lambda item: rank.get(groups[item], len(rank)))


def _tag_group(item: pytest.Item, group: str) -> None:
    """loadgroup reads an item's group from its node id, ``<id>@<group>``. pytest-xdist
    (3.8) writes that id to ``item._nodeid`` after this hook, from the marker, which
    pytest < 9.2 reads; pytest >= 9.2 keeps the id in ``item._id`` (a NodeId), so it is
    written here, else every test would be a group of its own."""
    if hasattr(item, "_id"):
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(f"{item.nodeid}@{group}")


@pytest.hookimpl(tryfirst=True)        # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _mark(items)
    _group_for_workers(config, items)


def _mark(items: list[pytest.Item]) -> None:
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


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """No COLUMNS or LINES from outside (pytest-xdist's workers get 80x24): the output
    tests set them where they mean a terminal's width."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(scope="session")
def outage_mariadb() -> Iterator[PrivateMariaDB]:
    """A MariaDB server of this pytest process for the tests that stop and restart one
    (tests/agents_daemon/mariadb_control.py): never the server every other test uses."""
    from tests.agents_daemon.mariadb_control import PrivateMariaDB

    private = PrivateMariaDB(_HERE.parent / "out" / "mariadb-outage")
    try:
        yield private
    finally:
        private.close()


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

