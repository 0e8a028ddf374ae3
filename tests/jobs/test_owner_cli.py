"""Ownership on the embedded SQLite store: the OS user is recorded as the owner and the CLI
refuses someone else's job (the owner of the database file is the operator). A guard
against mistakes, not a security boundary (docs/design/trust.md); the
enforced version is MariaDB's, tests/store/test_ownership.py."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from andreas.store import migrate, open_store
from andreas.store import credentials, owners
from andreas.store.models import JobAttempt
from tests.jobs.conftest import FakeExecutor, run_cli
from tests.store.helpers import add_job, add_node

ME = credentials.os_user()


@pytest.fixture
def db(tmp_path):
    url = migrate.upgrade_url(f"sqlite:///{tmp_path / 'andreas.db'}")
    return url


def as_user(monkeypatch, name: str) -> None:
    monkeypatch.setattr(credentials, "os_user", lambda: name)


def submit(db: str, *extra: str) -> str:
    r = run_cli(db, "submit", "registry.example/ml/train:1", "--epochs", "3", "--due", "+2h",
                "--weight", "0.1", "--env", "TOKEN=s3cret", "-q", *extra)
    assert r.exit_code == 0, r.output
    return r.output.strip()


def state_of(db: str, job_id: str) -> tuple[str, str | None]:
    store = open_store(db)
    try:
        with store.session() as s:
            return tuple(s.execute(sa.text("SELECT state, owner FROM jobs WHERE id = :j"),
                                   {"j": job_id}).one())
    finally:
        store.dispose()


def test_the_submitting_os_user_is_the_owner_and_queue_shows_it(db, monkeypatch):
    mine = submit(db)
    assert state_of(db, mine) == ("queued", ME)
    as_user(monkeypatch, "alice")
    alices = submit(db)
    assert state_of(db, alices) == ("queued", "alice")
    listed = run_cli(db, "queue", "--json")
    assert {r["id"]: r["owner"] for r in json.loads(listed.output)} == {mine: ME,
                                                                        alices: "alice"}
    only = run_cli(db, "queue", "--mine", "--json")
    assert [r["id"] for r in json.loads(only.output)] == [alices]
    table = run_cli(db, "queue")
    assert "OWNER" in table.output and "alice" in table.output
    shown = run_cli(db, "show", alices)
    assert shown.exit_code == 0 and "owner" in shown.output and "alice" in shown.output


def test_someone_elses_job_is_refused_with_one_line(db, monkeypatch):
    as_user(monkeypatch, "alice")
    alices = submit(db)
    _, node_id, _ = add_node_to(db)
    with_attempt(db, alices, node_id)
    as_user(monkeypatch, "bob")
    expected = (f"andreas: error: job {alices}: owned by alice, not bob; only its owner or "
                "an operator may {} it")
    for args, action in ((("cancel", alices), "cancel"),
                         (("logs", alices), "read the logs of"),
                         (("show", alices), "read")):
        fake = FakeExecutor()
        r = run_cli(db, *args, executor_factory=lambda settings, fake=fake: fake)
        assert r.exit_code == 2, r.output
        assert r.output.splitlines() == [expected.format(action)]
        assert "s3cret" not in r.output and fake.log_calls == []
    assert state_of(db, alices) == ("queued", "alice")
    bobs = submit(db)
    done = run_cli(db, "cancel", bobs)
    assert done.exit_code == 0 and f"job {bobs}: cancelled (was queued)" in done.output
    assert state_of(db, bobs) == ("cancelled", "bob")
    as_user(monkeypatch, "alice")
    assert run_cli(db, "cancel", alices).exit_code == 0
    assert state_of(db, alices) == ("cancelled", "alice")


def test_the_owner_of_the_database_file_is_the_operator(db, monkeypatch):
    as_user(monkeypatch, "bob")
    bobs = submit(db)
    monkeypatch.undo()                         # back to the file's owner
    store = open_store(db)
    try:
        legacy = add_job(store)                # a row from before owners: owner NULL
        with store.session() as s:
            assert owners.access(s).operator
    finally:
        store.dispose()
    as_user(monkeypatch, "bob")
    r = run_cli(db, "cancel", legacy)
    assert r.exit_code == 2
    assert r.output.splitlines() == [
        f"andreas: error: job {legacy}: has no recorded owner (submitted before owners were "
        "recorded); only an operator may cancel it"]
    monkeypatch.undo()
    for job_id in (bobs, legacy):
        r = run_cli(db, "cancel", job_id)
        assert r.exit_code == 0, r.output
        assert state_of(db, job_id)[0] == "cancelled"


def add_node_to(db: str):
    store = open_store(db)
    try:
        return add_node(store, gpus=1)
    finally:
        store.dispose()


def with_attempt(db: str, job_id: str, node_id: int) -> None:
    store = open_store(db)
    try:
        with store.session() as s:
            s.add(JobAttempt(job_id=job_id, attempt=1, node_id=node_id, gpu_ids=[0],
                             container_id="c-1", start_s=1.0))
    finally:
        store.dispose()
