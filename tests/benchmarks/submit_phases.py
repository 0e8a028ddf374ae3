"""Phases of ``andreas submit``'s MariaDB write in a fresh process (run by
bench_submit_breakdown.py; prints one JSON line): PyMySQL's import, the connect, the
session check (``quick._mysql_prepare``), the write (the CALL of ``andreas_submit`` for a
restricted account, the INSERT for the administrator), the commit (none in autocommit
mode), the close; ``ssl_loaded``: whether the TLS module was executed.
Usage: ``python submit_phases.py URL`` (the job row is a throw-away one)."""

from __future__ import annotations

import json
import sys
import time
import uuid

t_start = time.perf_counter()
from andreas.store import quick  # noqa: E402


def main() -> int:
    url = sys.argv[1]
    t = {"import_quick": time.perf_counter() - t_start}
    where = quick.target(url, None)
    assert where is not None and where.kind == "mysql", url
    t0 = time.perf_counter()
    kwargs = where.connect or {}
    try:      # the CLI's own call (a lazy ssl where TLS is off); older: no argument
        pymysql = quick.import_pymysql(tls=not kwargs.get("ssl_disabled", False))
    except TypeError:
        pymysql = quick.import_pymysql()
    t["import_pymysql"] = time.perf_counter() - t0
    t["ssl_loaded"] = "_ssl" in sys.modules
    t0 = time.perf_counter()
    conn = pymysql.connect(**kwargs)
    t["connect"] = time.perf_counter() - t0
    job = f"ph-{uuid.uuid4().hex[:8]}"
    row = {"id": job, "image": "busybox", "command": ["true"], "env": {}, "epochs": 1,
           "epochs_done": 0, "submit_s": time.time(), "due_s": time.time() + 3600,
           "weight": 0.01, "application": "bench", "grace_s": 2.0, "state": "queued",
           "state_changed_s": time.time(), "max_gpus": 1, "failures": 0, "reason": None,
           "gpu_milli": None, "gpu_memory_mib": None}
    with conn.cursor() as cur:
        t0 = time.perf_counter()
        prepared = quick._mysql_prepare(cur)
        t["session_check"] = time.perf_counter() - t0
        assert prepared is not None
        me, restricted, _key = prepared
        t["restricted"] = restricted
        t0 = time.perf_counter()
        if restricted:
            cur.execute(quick._CALL_SUBMIT, [row["id"], row["image"], '["true"]', "{}", 1,
                                             row["due_s"], 0.01, "bench", 2.0, 1, None, None])
        else:
            cur.execute("SELECT id FROM jobs WHERE id = %s LIMIT 1", [job])
            cur.fetchone()
            marks = ", ".join("%s" for _ in quick.COLUMNS)
            cur.execute(f"INSERT INTO jobs ({', '.join(quick.COLUMNS)}) VALUES ({marks})",
                        quick._values({**row, "owner": me}))
        t["write"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if not kwargs.get("autocommit"):        # the CLI commits only outside autocommit
            conn.commit()
        t["commit"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.close()
    t["close"] = time.perf_counter() - t0
    t["total_in_process"] = time.perf_counter() - t_start
    print(json.dumps(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
