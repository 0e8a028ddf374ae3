"""The submit procedure's server time against the size of what it checks (issue 32).

``andreas_submit`` (``andreas/store/procedures.py``) validates a job's command and
environment in one ``JSON_TABLE`` pass each; the loop of ``JSON_EXTRACT(doc, '$[i]')`` it
replaced re-parsed the document per item (quadratic: 32 000 arguments took minutes of
server time). For each size, one ``CALL`` on a fresh database of
``ANDREAS_TEST_MARIADB_URL``; the baseline, measured in the same run, is the smallest
call, and the ratios show the growth (linear: ratio ~ size ratio). Times are printed,
never asserted. Run with the test server up:

    bash -c 'source scripts/mariadb-test-server.sh && mariadb_test_start out/mariadb && \
        trap mariadb_test_stop EXIT && .venv/bin/python tests/benchmarks/bench_submit_procedure.py'
"""

from __future__ import annotations

import json
import os
import time
import uuid

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from andreas.store import migrate
from andreas.store.engine import make_engine

CALL = ("CALL andreas_submit(%s, 'reg.example/t:1', %s, %s, 3, UNIX_TIMESTAMP() + 3600, 1, "
        "'train', 60, NULL, NULL, NULL)")
CASES = [("command", n, json.dumps(["x" * 16] * n), "{}") for n in (256, 1024, 4096)] + [
    ("command (refused)", 32000, json.dumps(["x"] * 32000), "{}")] + [
    ("env", n, "[]", json.dumps({f"V{i}": "v" * 64 for i in range(n)})) for n in (64, 256, 1024)]


def main() -> None:
    url = make_url(os.environ["ANDREAS_TEST_MARIADB_URL"])
    name = f"bench_{uuid.uuid4().hex[:8]}"
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 "
                             "COLLATE utf8mb4_unicode_ci")
    engine = make_engine(url.set(database=name))
    try:
        migrate.upgrade(engine)
        base = None
        print(f"{'case':20s} {'items':>6s} {'ms':>9s} {'x base':>7s}  result")
        for i, (what, n, command, env) in enumerate(CASES):
            start = time.perf_counter()
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(CALL, (f"b{i}", command, env))
                result = "stored"
            except sa.exc.DBAPIError as e:
                result = str(e.orig)[:60]
            ms = (time.perf_counter() - start) * 1000
            base = base or ms
            print(f"{what:20s} {n:6d} {ms:9.1f} {ms / base:7.2f}  {result}")
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE `{name}`")
        admin.dispose()


if __name__ == "__main__":
    main()
