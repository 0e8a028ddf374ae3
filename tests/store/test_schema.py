"""The head revision known without Alembic, and the agent's one-query schema check."""

from __future__ import annotations

import pytest

from andreas.store import StoreError
from andreas.store import schema
from andreas.store.engine import make_engine
from andreas.store.migrate import script_directory


def test_the_head_is_alembics():
    assert schema.head_revision() == script_directory().get_current_head()


def test_two_heads_are_an_error(tmp_path, monkeypatch):
    for name, rev, down in (("a", "1", None), ("b", "2", "1"), ("c", "3", "1")):
        (tmp_path / f"{name}.py").write_text(f"revision = {rev!r}\ndown_revision = {down!r}\n")
    (tmp_path / "__init__.py").write_text('"""no revision here"""\n')
    monkeypatch.setattr(schema, "VERSIONS", tmp_path)
    schema.head_revision.cache_clear()
    try:
        with pytest.raises(StoreError, match="have 2 heads"):
            schema.head_revision()
        (tmp_path / "d.py").write_text('revision: str = "4"\ndown_revision = ("2", "3")\n')
        schema.head_revision.cache_clear()
        assert schema.head_revision() == "4"                    # a merge revision
    finally:
        schema.head_revision.cache_clear()


def test_schema_problem_names_the_upgrade(db_url, backend):
    engine = make_engine(db_url)
    try:
        assert schema.schema_problem(engine) is None
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0001'")
        problem = schema.schema_problem(engine)
        assert "at revision 0001" in problem and "andreas db upgrade" in problem
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"UPDATE alembic_version SET version_num = "
                                 f"'{schema.head_revision()}'")
        engine.dispose()
    empty = make_engine(backend.fresh_url(), create_dir=True)
    try:
        if backend.mariadb:
            assert "is not migrated" in schema.schema_problem(empty)
        else:
            with empty.connect() as conn:      # an SQLite file must exist to be opened
                conn.exec_driver_sql("SELECT 1")
            assert "is not migrated" in schema.schema_problem(empty)
    finally:
        empty.dispose()
