"""The schema revision this andreas needs, known without importing Alembic.

The head is read from the migration scripts themselves (their ``revision`` and
``down_revision`` assignments, parsed with :mod:`ast`, never executed), so the
long-running agent checks the database's revision without Alembic's ~10 MB of imports;
:mod:`andreas.store.migrate` uses the same function, so there is one answer (a test holds
it to Alembic's own ``ScriptDirectory``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from typing import TYPE_CHECKING

from andreas.store.errors import StoreError

if TYPE_CHECKING:   # head_revision() needs no SQLAlchemy (the quick submission path)
    from sqlalchemy import Engine

VERSIONS = Path(__file__).resolve().parent / "migrations" / "versions"


_REVISION_LINES = re.compile(r"^(?:revision|down_revision)\b.*$", re.MULTILINE)


def _assigned(script: Path) -> dict[str, object]:
    """The module-level literal assignments of one migration script: only its
    ``revision`` lines are parsed (the whole script, a few ms each, only when one of
    them runs over several lines)."""
    out: dict[str, object] = {}
    text = script.read_text(encoding="utf-8")
    try:
        body = ast.parse("\n".join(_REVISION_LINES.findall(text)), str(script)).body
    except SyntaxError:
        body = ast.parse(text, str(script)).body
    for node in body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
                out[target.id] = ast.literal_eval(value)
    return out


@functools.cache
def head_revision() -> str:
    """The newest migration: the one revision no other script names as its parent."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in sorted(VERSIONS.glob("*.py")):
        found = _assigned(script)
        if "revision" not in found:
            continue                      # the package's __init__.py
        revisions.add(str(found["revision"]))
        down = found.get("down_revision")
        if isinstance(down, (tuple, list)):
            parents.update(str(d) for d in down)
        elif down is not None:
            parents.add(str(down))
    heads = revisions - parents
    if len(heads) != 1:
        raise StoreError(f"migration scripts in {VERSIONS} have {len(heads)} heads "
                         f"({', '.join(sorted(heads)) or 'none'}); expected one")
    return heads.pop()


def schema_problem(engine: Engine) -> str | None:
    """None when the database is at this andreas's head revision, else what to do (the
    agent's check: one query, no Alembic)."""
    from sqlalchemy.exc import DBAPIError

    from andreas.store.errors import error_code

    from andreas.config import mask_url

    shown = mask_url(engine.url)
    try:
        with engine.connect() as conn:
            revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    except DBAPIError as e:
        text = str(getattr(e, "orig", e)).lower()
        if error_code(e) == 1146 or "no such table" in text:
            return f"database {shown} is not migrated; run `andreas db upgrade`"
        raise
    head = head_revision()
    if revision != head:
        return (f"database {shown} is at revision {revision or 'none'}, this agent needs "
                f"{head}; run `andreas db upgrade` (or use the agent of that version)")
    return None
