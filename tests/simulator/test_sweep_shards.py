"""A sweep in parts (``--shard I/K`` then ``--merge``) and on Dask gives the sweep's rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from andreas.cli import main
from andreas.simulator.results import SimOptions
from andreas.simulator.sweep import Grid, run_sweep

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

TIMING = ("wall_s", "optimizer_mean_s", "optimizer_max_s", "optimizer_total_s")
SWEEP = ("simulate", "--sweep", "--nodes", "2,3", "--seeds", "2", "--policies", "edf,greedy",
         "--workers", "1", "--quiet")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def _same(rows: list[dict]) -> list[dict]:
    """The rows without their wall-clock figures (the only part that may differ)."""
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_grid_shards_partition_the_tasks() -> None:
    grid = Grid(nodes=(2, 3), seeds=(1, 2, 3), policies=("edf", "greedy"))
    every = grid.tasks()
    parts = [grid.tasks((i, 4)) for i in range(1, 5)]
    assert sorted(t for p in parts for t in p) == sorted(every)
    assert len(every) == 12 and [len(p) for p in parts] == [3, 3, 3, 3]
    with pytest.raises(ValueError):
        grid.tasks((0, 4))


def test_shards_merged_equal_the_whole_sweep(tmp_path: Path) -> None:
    whole = run(*SWEEP, "--out", str(tmp_path / "whole"))
    assert whole.exit_code == 0, whole.output
    for i in (1, 2, 3):
        part = run(*SWEEP, "--shard", f"{i}/3", "--out", str(tmp_path / "parts"))
        assert part.exit_code == 0, part.output
        assert f"sweep-part-{i}-of-3.json" in part.stdout
    parts = sorted(str(p) for p in (tmp_path / "parts").glob("sweep-part-*.json"))
    assert len(parts) == 3
    merged = run("simulate", "--merge", *parts, "--out", str(tmp_path / "merged"))
    assert merged.exit_code == 0, merged.output
    a = json.loads((tmp_path / "whole" / "sweep.json").read_text())
    b = json.loads((tmp_path / "merged" / "sweep.json").read_text())
    assert len(a["runs"]) == 8
    assert _same(a["runs"]) == _same(b["runs"])
    assert [r["total_cost_mean"] for r in a["summary"]] == \
        [r["total_cost_mean"] for r in b["summary"]]
    assert (tmp_path / "merged" / "sweep-summary.csv").stat().st_size > 0


def test_merge_refuses_missing_repeated_and_foreign_parts(tmp_path: Path) -> None:
    for i in (1, 2):
        assert run(*SWEEP, "--shard", f"{i}/2", "--out", str(tmp_path)).exit_code == 0
    other = run("simulate", "--sweep", "--nodes", "2", "--seeds", "1", "--policies", "edf",
                "--workers", "1", "--quiet", "--shard", "1/2", "--out", str(tmp_path / "o"))
    assert other.exit_code == 0, other.output
    p1, p2 = (str(tmp_path / f"sweep-part-{i}-of-2.json") for i in (1, 2))
    foreign = str(tmp_path / "o" / "sweep-part-1-of-2.json")
    cases = {(p1,): "shard 2/2 missing", (p1, p1): "again",
             (p1, foreign): "not a part of the same sweep"}
    for parts, message in cases.items():
        result = run("simulate", "--merge", *parts, "--out", str(tmp_path / "m"))
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "m").exists()           # nothing written
    bad = run(*SWEEP, "--shard", "3/2", "--out", str(tmp_path))
    assert bad.exit_code == 2 and "--shard" in bad.output
    assert run("simulate", p1).exit_code == 2      # a part file without --merge


def test_dask_runs_the_same_tasks() -> None:
    import distributed   # andreas[test] installs it (andreas[dask])
    grid = Grid(nodes=(2,), seeds=(1, 2), policies=("edf", "greedy"))
    options = SimOptions()
    local = run_sweep(grid, options, workers=1, show_progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        remote = run_sweep(grid, options, show_progress=False,
                           dask=cluster.scheduler_address)
    assert len(local) == 4
    assert _same(local) == _same(remote)
