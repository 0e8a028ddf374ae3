"""The issue's acceptance check, through the real commands on the embedded SQLite store:
with ``[profiler] nodes = ["p1"]``, two registered fake-GPU nodes and one job of an
application nobody profiled, ``andreas manager run --dry-run --once`` stores a decision
that starts the job on p1 for profiling, and ``andreas queue`` shows it ``profiling``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    head = ([sys.executable, "-c", "from agents.cli import main; main()"] if args[0] == "agents"
            else [sys.executable, "-m", args[0]])
    return subprocess.run([*head, *args[1:]], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=300)


def _env(tmp_path: Path, nodes: str) -> dict[str, str]:
    (tmp_path / "andreas.toml").write_text(f"[profiler]\nnodes = {nodes}\n")
    db = tmp_path / "andreas.db"
    return {**os.environ, "ANDREAS_CONFIG": str(tmp_path / "andreas.toml"),
            "ANDREAS_DB_URL": f"sqlite:///{db}", "XDG_DATA_HOME": str(tmp_path),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def test_dry_run_once_starts_a_new_application_on_the_profiling_node(tmp_path):
    env = _env(tmp_path, '["p1"]')
    assert _run(["andreas", "db", "upgrade"], env, tmp_path).returncode == 0
    for name in ("p1", "n1"):
        r = _run(["agents", "--fake-gpus", "2xV100", "--register"],
                 {**env, "ANDREAS_NODE_NAME": name}, tmp_path)
        assert r.returncode == 0, r.stderr
    r = _run(["andreas", "submit", "example/train:1", "--epochs", "5", "--due", "+2h",
              "--weight", "0.01", "--app", "never-profiled"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    r = _run(["andreas", "manager", "run", "--dry-run", "--once"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    import sqlite3
    with sqlite3.connect(tmp_path / "andreas.db") as c:
        plan = json.loads(c.execute("SELECT plan FROM decisions ORDER BY id DESC").fetchone()[0])
    [action] = plan["actions"]
    assert action["kind"] == "profile" and action["node"] == "p1", action
    r = _run(["andreas", "queue", "--json"], env, tmp_path)
    [row] = json.loads(r.stdout)
    assert row["state"] == "profiling" and row["node"] == "p1"


def test_an_unknown_profiling_node_stops_the_manager_with_one_line(tmp_path):
    env = _env(tmp_path, '["gpu99"]')
    assert _run(["andreas", "db", "upgrade"], env, tmp_path).returncode == 0
    r = _run(["andreas", "manager", "run", "--dry-run", "--once"], env, tmp_path)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert "[profiler] nodes: unknown node 'gpu99'" in last and "Traceback" not in r.stderr
