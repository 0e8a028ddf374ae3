"""``Store.writes`` counts the statements that may change data (what lets a manager tick
skip reading the store again when it wrote nothing)."""

from __future__ import annotations

import sqlalchemy as sa

from andreas.store import JobState, transition
from andreas.store import lease

from .helpers import add_job


def test_writes_count_changes_not_reads_nor_the_lease(store):
    count = store.writes
    before = count()
    with store.session() as s:
        s.execute(sa.text("SELECT 1"))
        s.execute(sa.select(sa.func.count()).select_from(sa.table("jobs")))
    with store.begin() as conn:
        lease.renew(conn, holder="x", token=0, ttl_s=1.0)      # the lease holds no data
    assert count() == before
    job = add_job(store, state=JobState.QUEUED)
    after_insert = count()
    assert after_insert > before
    with store.session() as s:
        transition(s, job, JobState.RUNNING, expected=JobState.QUEUED)
    assert count() > after_insert
