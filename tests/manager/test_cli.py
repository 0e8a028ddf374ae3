"""``andreas costs`` and ``andreas manager run`` through the CLI."""

from __future__ import annotations

import json

from click.testing import CliRunner

from andreas.cli import main
from andreas.profiles import load_profiles
from tests.manager.helpers import add_node


def test_costs_table_and_json(mstore, db_url):
    add_node(mstore, "a", gpus=2)
    env = {"ANDREAS_DB_URL": db_url, "ANDREAS_CONFIG": ""}
    r = CliRunner().invoke(main, ["costs", "--json"], env=env)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [(x["node"], x["g"], x["source"], x["samples"]) for x in rows] == [
        ("a", 0, "profiles", 0), ("a", 1, "profiles", 0), ("a", 2, "profiles", 0)]
    assert [x["power_w"] for x in rows] == list(load_profiles().node_power_w("V100", 2))
    assert rows[2]["cost_per_hour"] == rows[2]["power_w"] / 1000 * 1.33 * 0.172
    r = CliRunner().invoke(main, ["costs"], env=env)
    assert r.exit_code == 0 and "profiles" in r.output and "2/2" in r.output


def test_costs_without_nodes_says_so_and_exits_0_as_nodes_does(mstore, db_url):
    env = {"ANDREAS_DB_URL": db_url, "ANDREAS_CONFIG": ""}
    r = CliRunner().invoke(main, ["costs"], env=env)
    assert r.exit_code == 0 and r.output.startswith("no nodes registered")
    r = CliRunner().invoke(main, ["costs", "--json"], env=env)
    assert r.exit_code == 0 and r.output == "[]\n"


def test_manager_run_rejects_a_bad_policy():
    r = CliRunner().invoke(main, ["manager", "run", "--policy", "nope"])
    assert r.exit_code == 2 and "nope" in r.output


def test_a_dry_runs_start_does_not_read_as_running(mstore, db_url):
    """`andreas manager run --dry-run --once` records attempts (the loop works as for
    real); queue and show said `running` of a job no container runs (issue 34)."""
    from tests.manager.helpers import add_job

    add_node(mstore, "a", gpus=2)
    add_job(mstore, "dj", application="resnet50")
    env = {"ANDREAS_DB_URL": db_url, "ANDREAS_CONFIG": ""}
    r = CliRunner().invoke(main, ["manager", "run", "--dry-run", "--once"], env=env)
    assert r.exit_code == 0, r.output
    queue = CliRunner().invoke(main, ["queue"], env=env)
    line = next(ln for ln in queue.output.splitlines() if ln.startswith("dj "))
    assert " dry-run " in line and "running" not in line
    [row] = json.loads(CliRunner().invoke(main, ["queue", "--json"], env=env).output)
    assert (row["state"], row["dry_run"]) == ("running", True)
    show = CliRunner().invoke(main, ["show", "dj"], env=env)
    assert "dry-run (the manager recorded a start; no container runs)" in show.output
