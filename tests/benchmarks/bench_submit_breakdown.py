"""Where a submission's time goes, per store: the ``andreas submit`` CLI's phases and the
manager's path from the wake-up to the container start (issue 34).

CLI: ``python -X importtime`` of the real command (the largest imports), then the phases
of the MariaDB write in a fresh process (``submit_phases.py``: PyMySQL's import, connect,
session check, the write, commit) for the administrator (INSERT) and for a person's
restricted account (``CALL andreas_submit``).

Manager: the real daemon (``andreas.manager.daemon.run``) in this process, one node with
2 fake GPUs on ``$DOCKER_HOST``, the same settings as bench_submit.py. Its phases are
timed by wrapping them (observe, fence, load_state, profiling review, snapshot, decide,
decision write, apply, the attempt's transaction, the engine's create+start), and every
SQL statement, ping, commit and rollback by SQLAlchemy's events; times from the wake-up
(the submission's datagram received), ``after_s``: bench_submit.py's CLI exit to the
engine's ``start`` event. Printed: medians over the trials of each phase's time and
statement count in the tick that started the job. Times are printed, never asserted.
Run with the services of ``bash scripts/bench.sh submit`` (``DOCKER_HOST``,
``ANDREAS_TEST_DOCKER_IMAGE``, ``ANDREAS_TEST_MARIADB_URL``):
``python tests/benchmarks/bench_submit_breakdown.py [--mariadb] --trials 8``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import docker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import bench_submit as bs  # noqa: E402

EVENTS: list[tuple[str, str, float, float]] = []   # (kind, label, start, seconds)
PHASES = [
    ("andreas.manager.manager", "Manager", ("tick", "_load_state", "review_profiling",
                                            "reschedule", "_plan", "_document")),
    ("andreas.manager.reconcile", "Reconciler", ("observe", "settle", "apply")),
    ("andreas.manager.engine_view", "EngineView", ("refresh",)),
    ("andreas.manager.starting", "Starter", ("may_start", "start", "_open")),
    ("andreas.manager.lock", "Lease", ("check",)),
    ("andreas.manager.decider", "Helper", ("decide",)),
    ("andreas.manager.decider", "InProcess", ("decide",)),
    ("andreas.executor.docker", "DockerExecutor", ("start", "ensure_image", "containers")),
]
FUNCTIONS = [("andreas.manager.manager", ("load_state", "build_snapshot", "add_decision",
                                          "fill_predicted_cost")),
             ("andreas.manager.starting", ("record_container",))]


def timed(label: str, fn, kind: str = "phase"):
    """``fn``, appending (kind, label, start, duration) to EVENTS on each call."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            EVENTS.append((kind, label, t0, time.perf_counter() - t0))
    return wrapper


def instrument() -> None:
    for module, cls, names in PHASES:
        owner = getattr(importlib.import_module(module), cls)
        for name in names:
            setattr(owner, name, timed(f"{cls}.{name}", getattr(owner, name)))
    for module, names in FUNCTIONS:
        mod = importlib.import_module(module)
        for name in names:
            setattr(mod, name, timed(name, getattr(mod, name)))
    from andreas.manager.manager import Manager

    wake_now = Manager.wake_now

    def marked(self, why=""):
        EVENTS.append(("mark", "wake", time.perf_counter(), 0.0))
        return wake_now(self, why)
    Manager.wake_now = marked


def watch_sql(engine) -> None:
    from sqlalchemy import event

    local = threading.local()

    @event.listens_for(engine, "before_cursor_execute")
    def before(conn, cursor, statement, params, context, executemany):
        local.t0 = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def after(conn, cursor, statement, params, context, executemany):
        EVENTS.append(("sql", shape(statement), local.t0, time.perf_counter() - local.t0))

    dialect = engine.dialect
    for name in ("do_ping", "do_commit", "do_rollback"):
        setattr(dialect, name, timed(name[3:], getattr(dialect, name), "db"))

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, record):
        EVENTS.append(("db", "connect", time.perf_counter(), 0.0))


def shape(statement: str) -> str:
    """The statement's kind and first table, e.g. ``SELECT jobs``."""
    s = " ".join(statement.split())
    verb = s.split(" ", 1)[0].upper()
    m = re.search(r"\b(?:FROM|INTO|UPDATE|CALL)\s+`?(\w+)", s, re.I)
    return f"{verb} {m.group(1) if m else s[:40]}"


def cli_imports(env: dict[str, str], image: str, runs: int = 3) -> dict:
    """``-X importtime`` of ``andreas submit``: the total and the heaviest top-level
    imports (median of ``runs``)."""
    totals, tops = [], collections.defaultdict(list)
    argv = [sys.executable, "-X", "importtime", str(bs.BIN / "andreas"), "submit", image,
            "--epochs", "1", "--due", "+1h", "--weight", "0.01", "--app", "imp",
            "--max-gpus", "1", "--quiet"]
    for _ in range(runs):
        out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
        total = 0
        for line in out.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
            if m and len(m.group(3)) == 1:          # a top-level import
                total += int(m.group(2))
                tops[m.group(4)].append(int(m.group(2)))
        totals.append(total / 1e6)
    top = sorted(((statistics.median(v) / 1e6, k) for k, v in tops.items()), reverse=True)
    return {"total_s": statistics.median(totals), "top": [(k, s) for s, k in top[:12]]}


def cli_phases(url: str, runs: int) -> dict:
    out = collections.defaultdict(list)
    for _ in range(runs):
        line = subprocess.run([sys.executable, str(HERE / "submit_phases.py"), url],
                              check=True, capture_output=True, text=True).stdout
        for k, v in json.loads(line).items():
            out[k].append(v)
    return {k: statistics.median(v) if not isinstance(v[0], bool) else v[0]
            for k, v in out.items()}


def submitter_url(admin_url: str) -> str:
    """A person's account with the submitter role on the database of ``admin_url``."""
    from sqlalchemy.engine import make_url

    from andreas.store import accounts
    from andreas.store.engine import make_engine

    url = make_url(admin_url)
    prefix = f"b{secrets.token_hex(3)}_"
    engine = make_engine(url)
    roles = {r: secrets.token_urlsafe(12) for r in accounts.ROLES}
    accounts.apply(engine, url.database, roles, prefix, submitter=True)
    person, password = f"p{secrets.token_hex(3)}", secrets.token_urlsafe(12)
    accounts.add_user(engine, person, password=password, prefix=prefix)
    engine.dispose()
    return url.set(username=person, password=password).render_as_string(hide_password=False)


def manager_thread(env: dict[str, str]):
    """The daemon in a thread of this process, its store watched; (thread, stop)."""
    from andreas.config import load_settings
    from andreas.manager import daemon
    from andreas.store.opener import open_store

    settings = load_settings(env)
    store = open_store(settings=settings)
    watch_sql(store.engine)
    stop = threading.Event()
    thread = threading.Thread(target=daemon.run, args=(settings,), daemon=True,
                              kwargs={"store": store, "stop": stop, "install_signals": False})
    thread.start()
    return thread, stop, store


def breakdown(events, wake: float) -> dict:
    """The phases and statements of the tick that started the container; times from the
    wake-up (the submission's datagram received: ``Manager.wake_now``)."""
    starts = [e for e in events if e[1] == "DockerExecutor.start"]
    ticks = [e for e in events if e[1] == "Manager.tick" and e[2] >= wake - 0.5]
    tick = next(t for t in ticks if t[2] <= starts[0][2] <= t[2] + t[3])
    inside = [e for e in events if tick[2] <= e[2] <= tick[2] + tick[3]]
    out: dict = {"tick_start_after_wake": tick[2] - wake, "tick": tick[3],
                 "start_call_after_wake": starts[0][2] - wake,
                 "ticks_before": sum(1 for t in ticks if t[2] < tick[2])}
    for kind, label, _t0, dt in inside:
        if kind == "mark":
            continue
        key = f"{kind}:{label}"
        out[key] = out.get(key, 0.0) + dt
        out[f"n:{key}"] = out.get(f"n:{key}", 0) + 1
    out["sql_total"] = sum(dt for k, _, _, dt in inside if k == "sql")
    out["n:sql_total"] = sum(1 for k, *_ in inside if k == "sql")
    out["db_total"] = sum(dt for k, _, _, dt in inside if k == "db")
    # which phase each statement ran in (the innermost manager-thread phase around it)
    phases = [e for e in inside if e[0] == "phase" and e[1] not in ("Manager.tick",)]
    for kind, _label, t0, _dt in inside:
        if kind not in ("sql", "db"):
            continue
        around = [p for p in phases if p[2] <= t0 <= p[2] + p[3]]
        where = min(around, key=lambda p: p[3])[1] if around else "tick"
        out[f"in:{where}"] = out.get(f"in:{where}", 0) + 1
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--mariadb", action="store_true")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    host, image = os.environ["DOCKER_HOST"], os.environ["ANDREAS_TEST_DOCKER_IMAGE"]
    tmp = Path(tempfile.mkdtemp(prefix="andreas-bench-breakdown."))
    url = bs.store_url(tmp, args.mariadb)
    env = bs.configure(tmp, url, host, None, 30.0)
    result: dict = {"store": url.split(":")[0]}
    # the CLI's jobs go to a database of their own: no manager runs there
    aside = Path(tempfile.mkdtemp(prefix="andreas-bench-breakdown-cli."))
    aside_url = bs.store_url(aside, args.mariadb)
    result["imports"] = cli_imports(bs.configure(aside, aside_url, host, None, 30.0), image)
    if args.mariadb:
        result["cli_admin"] = cli_phases(aside_url, args.trials)
        result["cli_submitter"] = cli_phases(submitter_url(aside_url), args.trials)
    instrument()
    os.environ.update(env)
    client = docker.DockerClient(base_url=host, version="auto")
    thread, stop, store = manager_thread(env)
    log: list[dict] = []
    last: list = []
    try:
        deadline = time.monotonic() + 600
        while not any(e[1] == "Manager.tick" for e in EVENTS):
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the manager made no first tick")
            time.sleep(0.1)
        time.sleep(2.0)
        for i in range(args.trials + 1):
            del EVENTS[:]
            cli_s, after_s = bs.trial(env, client.api, image)
            # bs.trial returns durations; the absolute times come from the events
            events = list(EVENTS)
            ticks = [e for e in events if e[1] == "Manager.tick"]
            wake = next(e[2] for e in events if e[1] == "wake")
            row = breakdown(events, wake)
            row.update(cli_s=cli_s, after_s=after_s, n_ticks=len(ticks))
            if i:                                             # the first one warms up
                log.append(row)
                last = [(k, lbl, round((t0 - wake) * 1000, 3), round(dt * 1000, 3))
                        for k, lbl, t0, dt in sorted(events, key=lambda e: e[2])]
            print(f"  trial {i}: cli {cli_s * 1000:.0f} ms, after {after_s * 1000:.0f} ms, "
                  f"tick {row['tick'] * 1000:.1f} ms, {row['n:sql_total']} statements "
                  f"{row['sql_total'] * 1000:.1f} ms", flush=True)
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join(timeout=60)
        bs.remove_job_containers(client)
        store.dispose()
    keys = sorted({k for r in log for k in r})
    med = {k: statistics.median([r.get(k, 0) or 0 for r in log]) for k in keys}
    result["manager"] = med
    report(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**result, "trials": log, "last_events": last}, indent=1))
    return 0


def report(result: dict) -> None:
    print(f"== store {result['store']}")
    imp = result["imports"]
    print(f"CLI imports (-X importtime, top level) {imp['total_s'] * 1000:.0f} ms; largest: "
          + ", ".join(f"{k} {s * 1000:.1f}" for k, s in imp["top"]))
    for who in ("cli_admin", "cli_submitter"):
        if who in result:
            ph = result[who]
            print(f"CLI write phases ({who[4:]}, medians, ms): " + ", ".join(
                f"{k} {v * 1000:.1f}" for k, v in ph.items() if not isinstance(v, bool))
                  + f"; ssl imported: {ph['ssl_loaded']}")
    med = result["manager"]
    print("manager, the tick that started the job (medians):")
    for k, v in med.items():
        if k.startswith(("n:", "in:")):
            continue
        n = med.get(f"n:{k}")
        print(f"  {k:40s} {v:8g}" if k in ("n_ticks", "ticks_before") else
              f"  {k:40s} {v * 1000:8.2f} ms" + (f"   x{n:g}" if n else ""))
    print("  statements and driver calls by phase: " + ", ".join(
        f"{k[3:]} {v:g}" for k, v in med.items() if k.startswith("in:")))


if __name__ == "__main__":
    sys.exit(main())
