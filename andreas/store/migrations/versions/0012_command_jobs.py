"""Jobs without an image (``andreas submit --cmd``, run by the Slurm executor) through a
submitter's own account on MariaDB.

``jobs.image`` stays NOT NULL: a command job stores the empty string. The procedure
``andreas_submit`` (migration 0006) refused an empty image; it is recreated so that an
empty image is accepted when the command is a non-empty JSON list of strings (checked
before the image, as the other values). Everything else it checks is unchanged. SQLite has
no procedures: nothing to do there.

Revision ID: 0012
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import context, op

revision = "0012"
down_revision = "0009"
branch_labels = None
depends_on = None

IMAGE_CHECK = """  IF p_image IS NULL OR CAST(p_image AS BINARY) NOT REGEXP '^[A-Za-z0-9][A-Za-z0-9._/:@-]*$'
  THEN {fail};
  END IF;
"""
COMMAND_JOB = """  IF p_image IS NULL
     OR (p_image = '' AND (p_command IS NULL OR NOT JSON_VALID(p_command)
                           OR JSON_TYPE(p_command) <> 'ARRAY' OR JSON_LENGTH(p_command) = 0))
     OR (p_image <> '' AND CAST(p_image AS BINARY) NOT REGEXP '^[A-Za-z0-9][A-Za-z0-9._/:@-]*$')
  THEN {fail};
  END IF;
"""


def _v0006():
    """Migration 0006's module: its procedure text, which this one edits (one place)."""
    path = Path(__file__).with_name("0006_job_owner.py")
    spec = importlib.util.spec_from_file_location("andreas_migration_0006", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _procedures() -> tuple[str, str]:
    """(0006's andreas_submit, this revision's)."""
    m = _v0006()
    fail = m._fail("CONCAT('image ', QUOTE(p_image), ': not a Docker image reference')")
    old = IMAGE_CHECK.format(fail=fail)
    new_fail = m._fail("CONCAT('image ', QUOTE(p_image), ': not a Docker image reference "
                       "(or empty, with a command)')")
    if old not in m.SUBMIT:
        raise RuntimeError("migration 0012: andreas_submit of 0006 is not as expected")
    return m.SUBMIT, m.SUBMIT.replace(old, COMMAND_JOB.format(fail=new_fail))


def _replace(sql: str) -> None:
    if context.is_offline_mode():
        out = op.get_context().impl.static_output
        out("DROP PROCEDURE IF EXISTS andreas_submit;\nDELIMITER //")
        out(sql.strip() + "\n//\nDELIMITER ;\n")
        return
    bind = op.get_bind()
    bind.exec_driver_sql("DROP PROCEDURE IF EXISTS andreas_submit")
    bind.exec_driver_sql(sql.replace("%", "%%"))       # the driver's paramstyle


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    _replace(_procedures()[1])


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    _replace(_procedures()[0])
