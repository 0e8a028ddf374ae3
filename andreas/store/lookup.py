"""Finding a job by the id a user typed: exact first, else ignoring case (MariaDB compares
ids that way, and so do case-insensitive file systems where ids name checkpoint
directories), so every command resolves ids alike."""

from __future__ import annotations

from sqlalchemy import func, select

from andreas.errors import InputError
from andreas.store.nodes import Db
from andreas.store.owners import access, jobs_table, restricted


def find_job_id(db: Db, job_id: str) -> str | None:
    """The stored id of ``job_id`` (exact, else ignoring case); None when there is none
    (for a MariaDB submitter: none of theirs)."""
    jobs = jobs_table(db).c
    exact = db.execute(select(jobs.id).where(jobs.id == job_id)).scalar_one_or_none()
    if exact is not None:
        return exact
    return db.execute(select(jobs.id).where(func.lower(jobs.id) == job_id.lower())
                      .limit(1)).scalar_one_or_none()


def resolve_job_id(db: Db, job_id: str) -> str:
    """The stored id of ``job_id`` (exact, else ignoring case); InputError if none."""
    found = find_job_id(db, job_id)
    if found is None and restricted(db):
        raise InputError(f"job {job_id}: none of your jobs ({access(db).user}) has this id "
                         "(see `andreas queue --all`)")
    if found is None:
        raise InputError(f"job {job_id}: no such job (see `andreas queue --all`)")
    return found
