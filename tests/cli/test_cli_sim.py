"""``andreas simulate``: a run writes its report, a sweep aggregates, bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from andreas.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "example-exp-n10.json"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.slow
def test_simulate_a_trace_writes_results_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("simulate", "--trace", str(EXAMPLE), "--policies", "edf,greedy",
                 "--out", str(out), "--json", "--workers", "1")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["policy"] for r in rows] == ["edf", "greedy"]
    for r in rows:   # the FORMAT.md result keys
        for key in ("policy", "total_cost", "energy_cost", "tardiness_cost", "energy_kwh",
                    "late_jobs", "makespan_s", "optimizer_calls", "optimizer_mean_s",
                    "optimizer_max_s"):
            assert key in r
        assert r["total_cost"] > 0
    for name in ("summary.csv", "jobs.csv", "reduction.csv", "results.json", "cost.png",
                 "cumulative-cost.png", "occupancy-edf.png", "occupancy-greedy.png"):
        assert (out / name).stat().st_size > 0, name
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["jobs"]["edf"]) == 100
    assert doc["reduction_pct"]["edf"]["edf"] == 0.0


def test_simulate_generated_trace_table(tmp_path: Path) -> None:
    result = run("simulate", "--nodes", "3", "--trace-seed", "2", "--policies", "fifo,rg",
                 "--iterations", "20", "--out", str(tmp_path), "--quiet", "--no-plots",
                 "--workers", "1")
    assert result.exit_code == 0, result.output
    assert "fifo" in result.stdout and "rg" in result.stdout and "cost reduction" in result.stdout
    assert not list(tmp_path.glob("*.png"))


def test_sweep_aggregates_over_seeds(tmp_path: Path) -> None:
    result = run("simulate", "--sweep", "--nodes", "2,3", "--seeds", "2", "--policies",
                 "edf,greedy", "--out", str(tmp_path), "--json", "--workers", "2")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    summary = doc["summary"]
    assert {(r["nodes"], r["policy"]) for r in summary} == {
        (2, "edf"), (2, "greedy"), (3, "edf"), (3, "greedy")}
    assert all(r["runs"] == 2 for r in summary)
    runs = json.loads((tmp_path / "sweep.json").read_text())["runs"]
    assert len(runs) == 8
    edf = [r for r in summary if r["policy"] == "edf"]
    assert all(abs(r["vs_best_baseline_pct_mean"]) < 1e-9 for r in edf)   # edf is the best


def test_sweep_table_without_rg_or_pr_prints_the_headline_it_has(tmp_path: Path) -> None:
    """A sweep of edf and pr only (no rg) used to end in a traceback after the table."""
    result = run("simulate", "--sweep", "--nodes", "2", "--seeds", "1", "--policies",
                 "edf,pr", "--iterations", "5", "--out", str(tmp_path), "--quiet",
                 "--workers", "1")
    assert result.exit_code == 0, result.output
    assert "pr vs best baseline" in result.stdout and "pr vs rg" not in result.stdout
    result = run("simulate", "--sweep", "--nodes", "2", "--seeds", "1", "--policies",
                 "edf,fifo", "--out", str(tmp_path / "b"), "--quiet", "--workers", "1")
    assert result.exit_code == 0, result.output
    assert "eq. 3" not in result.stdout


def test_bad_trace_and_options_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "andreas-trace/9", "nodes": [], "jobs": []}))
    for args, words in (
        (("--trace", str(bad)), ("format",)),
        (("--trace", str(EXAMPLE), "--policies", "edf,nope"), ("--policies", "nope")),
        (("--arrival", "bursty"), ("--arrival", "bursty")),
        (("--nodes", "ten"), ("--nodes",)),
    ):
        result = run("simulate", *args, "--quiet", "--out", str(tmp_path / "o"))
        assert result.exit_code == 2, result.output
        err = result.stderr
        assert err.startswith("andreas: error: ") and err.count("\n") == 1, err
        for w in words:
            assert w in err
    not_json = tmp_path / "x.json"
    not_json.write_text("{not json")
    result = run("simulate", "--trace", str(not_json), "--quiet")
    assert result.exit_code == 2 and "x.json" in result.stderr


@pytest.mark.slow
def test_bound_is_an_entry_beside_the_policies_in_both_settings(tmp_path: Path) -> None:
    for cloud in ((), ("--cloud",)):
        result = run("simulate", "--nodes", "2", *cloud, "--policies", "greedy,pr",
                     "--iterations", "10", "--bound", "--json", "--no-plots", "--workers", "1",
                     "--out", str(tmp_path / f"b{len(cloud)}"))
        assert result.exit_code == 0, result.output
        rows = {r["policy"]: r for r in json.loads(result.stdout)}
        assert set(rows) == {"greedy", "pr", "bound"}
        assert 0 < rows["bound"]["total_cost"] <= min(rows[p]["total_cost"]
                                                       for p in ("greedy", "pr")) + 1e-9
    table = run("simulate", "--nodes", "2", "--policies", "greedy", "--bound", "--quiet",
                "--no-plots", "--workers", "1", "--out", str(tmp_path / "t"))
    assert table.exit_code == 0 and "lower bound" in table.stdout
    refused = run("simulate", "--nodes", "2", "--policies", "greedy", "--bound", "--tariff",
                  str(ROOT / "profiles" / "tariffs" / "day-night.csv"))
    assert refused.exit_code == 2 and "--bound" in refused.output


def test_energy_price_and_keep_node_take_their_documented_values(tmp_path: Path) -> None:
    """``--energy-price above-idle`` (the option's value, not the enum's name) and
    ``--keep-node`` reach greedy; a bad price is named with the values it takes."""
    result = run("simulate", "--nodes", "2", "--trace-seed", "2", "--policies", "greedy",
                 "--energy-price", "above-idle", "--keep-node", "--out", str(tmp_path),
                 "--json", "--no-plots", "--workers", "1")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["total_cost"] > 0
    bad = run("simulate", "--nodes", "2", "--policies", "greedy", "--energy-price", "idle")
    assert bad.exit_code == 2 and "'node', 'above-idle'" in bad.output
