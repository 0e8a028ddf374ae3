"""Fixtures of the job command tests: the store suite's backends (SQLite and MariaDB, the
MariaDB half fails without a server), a fixed clock, and the CLI run against one database
with the context object (``clock``, ``executor_factory``) instead of patching."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from andreas.cli import main
from andreas.executor.base import Executor, NodeRef
from tests.manager.fakes import FakeExecutor as ManagerFake
from tests.store.conftest import backend, db_url, store  # noqa: F401

NOW = 1_800_000_000.0          # 2027-01-15 08:00Z


def run_cli(db_url: str, *args: str, now: float = NOW,
            executor_factory: Callable[[Any], Executor] | None = None,
            env: dict[str, str] | None = None) -> Result:
    obj: dict[str, Any] = {"clock": lambda: now}
    if executor_factory is not None:
        obj["executor_factory"] = executor_factory
    environ = {"ANDREAS_DB_URL": db_url, "ANDREAS_CONFIG": "", "ANDREAS_POLICY": "",
               "ANDREAS_PERIOD_S": ""}
    environ.update(env or {})
    return CliRunner().invoke(main, list(args), obj=obj, env=environ, catch_exceptions=False)


def job_count(store) -> int:
    with store.session() as s:
        return s.execute(sa.text("SELECT COUNT(*) FROM jobs")).scalar_one()


class FakeExecutor(ManagerFake):
    """The manager tests' engine (held to the executor contract by
    tests/executor/test_contract.py) whose ``logs`` yield ``chunks`` for any container and
    are recorded in ``log_calls``; ``down`` nodes do not answer."""

    def __init__(self, chunks: tuple[bytes, ...] = (b"epoch 1\n", b"epoch 2\n"),
                 down: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.chunks = chunks
        self.unreachable = set(down)
        self.log_calls: list[tuple[str, str, str, bool, int | None]] = []
        self.closed = False

    def logs(self, node: NodeRef, container_id: str, *, follow: bool = False,
             tail: int | None = None) -> Iterator[bytes]:
        self._node(node)                               # NodeUnreachable for a down node
        self.log_calls.append((node.name, node.docker_endpoint, container_id, follow, tail))
        yield from self.chunks

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_executor() -> FakeExecutor:
    return FakeExecutor()
