"""`andreas trace import-alibaba`: Alibaba's openb GPU trace (CC BY 4.0, Weng et al., ATC '23)
as an andreas trace, on a verbatim excerpt of the CSV files (tests/data/alibaba)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from andreas.cli import main
from andreas.errors import InputError
from andreas.simulator.alibaba import (GPU_MODELS, QOS_WEIGHT, WEIGHT_UNIT, NodeRow,
                                     import_alibaba, node_power_w, stratified_nodes)
from andreas.formats.trace import dump_trace, load_trace, summary
from andreas.model import Demand

from tests.paths import SHARED as SHARED_DIR

DATA = Path(__file__).resolve().parents[1] / "data" / "alibaba"
PODS = DATA / "openb_pod_list_excerpt.csv"
NODES = DATA / "openb_node_list_excerpt.csv"
MULTI = DATA / "openb_pod_list_multigpu50_excerpt.csv"     # no time, qos or phase columns
# The published files as the project keeps them (README there): ../shared from the root.
SHARED = SHARED_DIR / "traces" / "alibaba-openb-2023"

# Counted by hand on the excerpt (58 pods, 20 GPU nodes).
CPU_ONLY = {"openb-pod-0005", "openb-pod-0016", "openb-pod-0210", "openb-pod-0477"}
PENDING = {"openb-pod-0061", "openb-pod-0084", "openb-pod-2321"}
SLICES = 16
EIGHT_GPU = {"openb-pod-0017", "openb-pod-0128", "openb-pod-0319"}
FOUR_GPU = {"openb-pod-2182", "openb-pod-2263"}


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def rows(path: Path) -> list[str]:
    return path.read_text().splitlines()


def write_rows(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- rules

def test_excerpt_keeps_scheduled_gpu_pods_and_counts_the_rest() -> None:
    trace, report = import_alibaba(PODS, NODES, keep_times=True)
    ids = {j.id for j in trace.jobs}
    assert report.pods == 58 and report.jobs == len(trace.jobs) == 51
    assert report.dropped == {"cpu-only": 4, "pending": 3}
    assert not ids & (CPU_ONLY | PENDING)
    assert report.phases == {"Failed": 9, "Running": 40, "Succeeded": 2}
    assert report.slices == SLICES == sum(1 for j in trace.jobs if j.demand.shared)
    assert report.nodes == report.nodes_read == 20 and report.gpus == 92
    assert report.nodes_by_type == {"A10": 1, "G2": 5, "G3": 1, "P100": 3, "T4": 5,
                                    "V100M16": 3, "V100M32": 2}
    # the file's own times: scale 1, submit = creation time, the full trace's busy share
    assert report.time_scale == 1.0 and report.load == pytest.approx(report.load_full)
    assert next(j for j in trace.jobs if j.id == "openb-pod-0033").submit_s == 9965463


def test_epochs_due_and_weight_follow_the_documented_rules() -> None:
    trace, _ = import_alibaba(PODS, NODES, slack=3.0, epoch_s=60)
    jobs = {j.id: j for j in trace.jobs}
    # openb-pod-0033: BE, Failed, scheduled 9965463, deleted 9965645: ran 182 s
    j = jobs["openb-pod-0033"]
    assert j.epochs == math.ceil(182 / 60) == 4
    assert set(j.epoch_time_s.values()) == {(45.5,)}
    assert j.due_s == j.submit_s + 3.0 * 182
    assert j.weight == pytest.approx(0.5 * WEIGHT_UNIT)
    # a Running pod: its deletion_time in the file is when it was last seen
    j = jobs["openb-pod-0000"]
    assert j.epochs == math.ceil(12537496 / 60)
    assert j.epochs * j.epoch_time_s["T4"][0] == pytest.approx(12537496, abs=j.epochs * 1e-3)
    assert {jobs[k].weight for k in ("openb-pod-0129", "openb-pod-0432")} == {4 * WEIGHT_UNIT}
    assert jobs["openb-pod-0017"].weight == pytest.approx(QOS_WEIGHT["Burstable"] * WEIGHT_UNIT)
    assert jobs["openb-pod-0001"].weight == pytest.approx(2 * WEIGHT_UNIT)


def test_default_epoch_length_and_slack() -> None:
    trace, _ = import_alibaba(PODS, NODES)
    j = next(j for j in trace.jobs if j.id == "openb-pod-2182")   # 4 GPUs, 6710 s
    assert j.epochs == math.ceil(6710 / 600) == 12
    assert j.due_s - j.submit_s == 2.0 * 6710
    # every GPU type with a node of >= 4 GPUs that also has its CPU and memory
    assert set(j.epoch_time_s) == {"G2", "G3", "T4", "V100M16", "V100M32"}
    assert all(len(t) == 4 for t in j.epoch_time_s.values())


def test_fractional_slice_demand_and_synthetic_gpu_memory() -> None:
    trace, _ = import_alibaba(PODS, NODES, seed=7)
    jobs = {j.id: j for j in trace.jobs}
    d = jobs["openb-pod-0039"].demand              # 4000 mCPU, 15258 MiB, 50 milli-GPU
    assert (d.gpus, d.gpu_milli, d.cpu_milli, d.memory_mib) == (1, 50, 4000, 15258)
    assert d.shared
    alpha, m = 0.05, 16384                          # smallest memory of its GPU types
    assert 0.6 * alpha * m - 1 <= d.gpu_memory_mib <= 0.8 * alpha * m + 1
    assert 0.2 * alpha * m - 1 <= d.gpu_memory_peak_mib <= 0.4 * alpha * m + 1
    assert 0 <= d.peak_probability <= 0.3
    for j in trace.jobs:
        d = j.demand
        if d.shared:
            low = min(GPU_MODELS[t].memory_mib for t in j.epoch_time_s)
            assert d.gpu_memory_mib + d.gpu_memory_peak_mib <= low
        else:   # a whole GPU is the job's alone: no GPU memory asked
            assert d.gpu_memory_mib == d.gpu_memory_peak_mib == 0
            assert d.gpu_milli == 1000
    assert jobs["openb-pod-0017"].demand == Demand(gpus=8, cpu_milli=88000, memory_mib=327680)
    # the V100M16 8-GPU node has 64 cores, the pod asks for 88: not a type it may run on
    assert set(jobs["openb-pod-0017"].epoch_time_s) == {"G2", "G3", "V100M32"}


def test_nodes_carry_capacities_memory_and_power() -> None:
    trace, _ = import_alibaba(PODS, NODES)
    nodes = {n.name: n for n in trace.nodes}
    g2 = nodes["openb-node-0026"]
    assert (g2.gpu_type, g2.gpus, g2.cpu_milli, g2.memory_mib) == ("G2", 8, 96000, 393216)
    assert g2.gpu_memory_mib == 32768 and nodes["openb-node-1032"].gpu_memory_mib == 24576
    assert nodes["openb-node-0036"].gpu_memory_mib == 16384
    for n in trace.nodes:
        assert len(n.power_w) == n.gpus + 1
        assert all(b > a for a, b in zip(n.power_w, n.power_w[1:]))
        assert n.power_w == node_power_w(n.gpu_type, n.gpus)
    # V100 types use the V100 profile as the ANDREAS scenarios do
    from andreas.profiles import node_power_w as profile_power
    assert nodes["openb-node-0025"].power_w == profile_power("V100", 4)
    assert nodes["openb-node-0036"].power_w == profile_power("T4", 2)
    # P100 and A10: TDP 250 W and 150 W busy, on the default host
    p100 = nodes["openb-node-0000"].power_w
    assert p100[2] - p100[1] == pytest.approx(250 - 30 + 20)


def test_seeded_sampling_is_reproducible(tmp_path: Path) -> None:
    a, ra = import_alibaba(PODS, NODES, sample=20, max_nodes=8, seed=3)
    b, _ = import_alibaba(PODS, NODES, sample=20, max_nodes=8, seed=3)
    c, _ = import_alibaba(PODS, NODES, sample=20, max_nodes=8, seed=4)
    dump_trace(a, tmp_path / "a.json")
    dump_trace(b, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert {j.id for j in a.jobs} != {j.id for j in c.jobs}
    assert len(a.jobs) == ra.jobs == 20 and ra.dropped["not sampled"] > 0
    assert sum(ra.dropped.values()) == 58 - 20


def test_memory_draws_do_not_depend_on_the_sample() -> None:
    full, _ = import_alibaba(PODS, NODES, seed=5)
    part, _ = import_alibaba(PODS, NODES, seed=5, sample=10, max_nodes=4)
    by_id = {j.id: j.demand for j in full.jobs}
    assert all(j.demand == by_id[j.id] for j in part.jobs)


def test_stratified_sampling_keeps_the_type_mix() -> None:
    nodes = [NodeRow(row=i, name=f"n{i}", cpu_milli=1, memory_mib=1, gpus=2, model=m)
             for i, m in enumerate(["G2"] * 60 + ["T4"] * 30 + ["P100"] * 10)]
    kept = stratified_nodes(nodes, 10, np.random.default_rng(0))
    assert Counter(n.model for n in kept) == {"G2": 6, "T4": 3, "P100": 1}
    kept = stratified_nodes(nodes, 7, np.random.default_rng(0))     # 4.2, 2.1, 0.7
    assert Counter(n.model for n in kept) == {"G2": 4, "T4": 2, "P100": 1}
    assert stratified_nodes(nodes, 500, np.random.default_rng(0)) == nodes
    # on the excerpt: 5 of 20 nodes, largest remainders first
    _, report = import_alibaba(PODS, NODES, max_nodes=5, seed=1)
    assert report.nodes_by_type == {"G2": 1, "P100": 1, "T4": 1, "V100M16": 1, "V100M32": 1}


def test_stratified_on_the_full_node_list() -> None:
    _, report = import_alibaba(SHARED / "openb_pod_list_default.csv",
                               SHARED / "openb_node_list_gpu_node.csv", max_nodes=100,
                               sample=300, seed=2, busy_share="full")
    assert report.nodes == 100
    assert report.nodes_by_type == {"G2": 45, "G3": 3, "P100": 11, "T4": 33, "V100M16": 5,
                                    "V100M32": 3}
    assert report.load == pytest.approx(report.load_full)


def test_busy_share_preserving_time_scale_and_target_share() -> None:
    full, rf = import_alibaba(PODS, NODES, busy_share="full")
    part, rp = import_alibaba(PODS, NODES, max_nodes=10, seed=1, busy_share="full")
    assert rp.gpus < rf.gpus and rp.time_scale > 1       # fewer GPUs: arrivals stretched
    assert rp.load == pytest.approx(rf.load_full, rel=1e-9)
    assert summary(part)["load"] == rp.offered        # trace show's figure, also reported
    busy, rb = import_alibaba(PODS, NODES, max_nodes=10, seed=1, busy_share=0.3)
    assert rb.load == pytest.approx(0.3, rel=1e-9) and rb.time_scale < rp.time_scale
    assert _busy_share(busy) == pytest.approx(0.3, rel=1e-6)    # the documented definition
    # more than all tasks submitted at once give: an error naming --busy-share
    with pytest.raises(InputError, match=r"^busy_share: must be < [0-9.]+ for these pods"):
        import_alibaba(PODS, NODES, max_nodes=10, seed=1, busy_share=50)
    with pytest.raises(InputError, match="cannot keep the full trace's busy share"):
        import_alibaba(PODS, NODES, sample=3, seed=1, busy_share="full")
    # durations are not scaled, only submissions
    jobs = {j.id: j for j in busy.jobs}
    for j in part.jobs:
        k = jobs[j.id]
        assert k.epochs == j.epochs and dict(k.epoch_time_s) == dict(j.epoch_time_s)
        assert k.due_s - k.submit_s == pytest.approx(j.due_s - j.submit_s)


def _busy_share(trace) -> float:
    """Mean share of GPUs busy between the first and last submission, each task run from
    its submission (FORMAT.md), computed from the written trace."""
    first = min(j.submit_s for j in trace.jobs)
    end = max(j.submit_s for j in trace.jobs)
    busy = 0.0
    for j in trace.jobs:
        run = j.epochs * next(iter(j.epoch_time_s.values()))[0]
        held = j.demand.gpus * (j.demand.gpu_milli / 1000 if j.demand.shared else 1)
        busy += held * max(0.0, min(j.submit_s + run, end) - j.submit_s)
    return busy / (sum(n.gpus for n in trace.nodes) * (end - first))


def test_jobs_that_fit_no_kept_node_are_dropped_and_counted(tmp_path: Path) -> None:
    t4 = [r for r in rows(NODES) if r.endswith(",2,T4")]
    nodes = write_rows(tmp_path / "nodes.csv", rows(NODES)[:1] + t4)
    lines = rows(PODS)
    k = next(i for i, r in enumerate(lines) if r.startswith("openb-pod-0001,"))
    lines[k] = lines[k].replace(",460,,LS,", ",460,V100M16|V100M32,LS,")
    pods = write_rows(tmp_path / "pods.csv", lines)
    trace, report = import_alibaba(pods, nodes)
    assert report.dropped == {"cpu-only": 4, "pending": 3, "no kept node of its gpu_spec": 1,
                              "fits no kept node": len(EIGHT_GPU | FOUR_GPU)}
    assert not {j.id for j in trace.jobs} & (EIGHT_GPU | FOUR_GPU | {"openb-pod-0001"})
    assert all(set(j.epoch_time_s) == {"T4"} for j in trace.jobs)


def test_gpu_spec_restricts_gpu_types(tmp_path: Path) -> None:
    lines = rows(PODS)
    k = next(i for i, r in enumerate(lines) if r.startswith("openb-pod-0001,"))
    lines[k] = lines[k].replace(",460,,LS,", ",460,V100M16|V100M32|V100M32,LS,")
    trace, _ = import_alibaba(write_rows(tmp_path / "pods.csv", lines), NODES)
    j = next(j for j in trace.jobs if j.id == "openb-pod-0001")
    assert set(j.epoch_time_s) == {"V100M16", "V100M32"}


def test_cpu_only_nodes_of_the_all_node_list_are_skipped(tmp_path: Path) -> None:
    nodes = write_rows(tmp_path / "all.csv", rows(NODES) + ["openb-node-9999,32000,262144,0,"])
    _, report = import_alibaba(PODS, nodes)
    assert report.cpu_nodes_skipped == 1 and report.nodes == 20 and report.nodes_read == 21


# --------------------------------------------------------------------------- errors

def corrupt(tmp_path: Path, source: Path, line: int, old: str, new: str) -> Path:
    lines = rows(source)
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    return write_rows(tmp_path / source.name, lines)


@pytest.mark.parametrize("which, line, old, new, message", [
    ("pods", 6, ",1,1000,", ",x,1000,", "row 6: field 'num_gpu' must be an integer >= 0, "
                                        'got "x"'),
    ("pods", 3, ",460,", ",1460,", "row 3: field 'gpu_milli' must be <= 1000, got \"1460\""),
    ("pods", 3, ",460,", ",0,", "row 3: field 'gpu_milli' must be 1..1000 when num_gpu >= 1"),
    ("pods", 4, ",LS,", ",Gold,", "row 4: field 'qos' must be one of Guaranteed, LS, "
                                  'Burstable, BE, got "Gold"'),
    ("pods", 4, ",Running,", ",Lost,", "row 4: field 'pod_phase' must be one of"),
    ("pods", 6, ",1000,,", ",1000,H100,", "row 6: field 'gpu_spec' must be empty or GPU types"),
    ("pods", 9, ",12000,", ",-12000,", "row 9: field 'cpu_milli' must be an integer >= 0, "
                                       'got "-12000"'),
    ("pods", 2, ",12537496,0", ",12537496,1.5", "row 2: field 'scheduled_time' must be an "
                                                "integer >= 0 or empty"),
    ("pods", 3, ",427061,12902960,427061", ",427061,12902960,1",
     "row 3: field 'scheduled_time' must be >= creation_time (427061)"),
    ("pods", 3, "openb-pod-0001", "openb-pod-0000", "row 3: field 'name' must be unique "
                                                    "(row 2 has it too)"),
    ("pods", 1, ",num_gpu,", ",gpus,", "row 1: header lacks column \"num_gpu\""),
    ("pods", 1, ",qos,", ",class,", "row 1: header has unknown column \"class\""),
    ("pods", 1, ",deletion_time,", ",deleted,", "row 1: header has unknown column"),
    ("pods", 4, ",LS,", ",LS,extra,", "row 4: has 12 fields, the header has 11"),
    ("nodes", 2, ",2,P100", ",2,H100", "row 2: field 'model' must be one of P100, T4"),
    ("nodes", 3, ",64000,", ",64k,", "row 3: field 'cpu_milli' must be an integer >= 1"),
])
def test_bad_row_is_one_line_exit_2_and_nothing_written(tmp_path: Path, which, line, old, new,
                                                         message) -> None:
    source = PODS if which == "pods" else NODES
    bad = corrupt(tmp_path, source, line, old, new)
    pods, nodes = (bad, NODES) if which == "pods" else (PODS, bad)
    out = tmp_path / "out.json"
    result = run("trace", "import-alibaba", "--pods", str(pods), "--nodes", str(nodes),
                 "--out", str(out))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0] == f"andreas: error: {bad}: {message}" or \
        lines[0].startswith(f"andreas: error: {bad}: {message}")
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]


@pytest.mark.parametrize("args, message", [
    (["--sample", "-5"], "--sample: must be an integer >= 1, got -5"),
    (["--sample", "0"], "--sample: must be an integer >= 1, got 0"),
    (["--slack", "0"], "--slack: must be a number > 0, got 0.0"),
    (["--slack", "-1"], "--slack: must be a number > 0, got -1.0"),
    (["--epoch-s", "0"], "--epoch-s: must be a number > 0, got 0.0"),
    (["--max-nodes", "0"], "--max-nodes: must be an integer >= 1, got 0"),
    (["--seed", "-1"], "--seed: must be an integer >= 0, got -1"),
    (["--load", "0"], "--load: must be a number > 0, got 0.0"),
])
def test_bad_options_exit_2_naming_the_option(tmp_path: Path, args, message) -> None:
    out = tmp_path / "out.json"
    result = run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
                 "--out", str(out), *args)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"andreas: error: {message}"
    assert not out.exists()


@pytest.mark.parametrize("option", ["--slack", "--epoch-s", "--load", "--since", "--sample",
                                    "--max-nodes"])
@pytest.mark.parametrize("value", ["nan", "1_0", "\u0661\u0662", "1e999", "9" * 40])
def test_numbers_that_are_no_plain_decimals_are_usage_errors(tmp_path: Path, option,
                                                             value) -> None:
    """`float()` reads 1_0, Unicode digits and nan; no option does (issue 32)."""
    out = tmp_path / "out.json"
    result = run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
                 "--out", str(out), option, value)
    assert result.exit_code == 2, result.output
    assert option in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_missing_file_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    missing = tmp_path / "nope.csv"
    result = run("trace", "import-alibaba", "--pods", str(missing), "--nodes", str(NODES),
                 "--out", str(out))
    assert result.exit_code == 2
    assert result.output.strip() == f"andreas: error: {missing}: cannot read CSV file (No " \
                                    "such file or directory)"
    assert not out.exists()


def test_empty_and_header_only_files(tmp_path: Path) -> None:
    empty = write_rows(tmp_path / "e.csv", [])
    empty.write_text("")
    with pytest.raises(InputError, match="is empty"):
        import_alibaba(empty, NODES)
    header = write_rows(tmp_path / "h.csv", rows(PODS)[:1])
    with pytest.raises(InputError, match="has no pods"):
        import_alibaba(header, NODES)


# --------------------------------------------------------------------------- CLI, loader, simulator

def test_cli_writes_a_trace_that_loads_and_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    result = run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
                 "--out", str(out), "--seed", "2")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "51 jobs (16 GPU slices, 35 whole-GPU" in text
    assert "dropped 7 of 58 pods: cpu-only 4, pending 3" in text
    assert "20 nodes with 92 GPUs (A10 1, G2 5, G3 1, P100 3, T4 5, V100M16 3, V100M32 2)" in text
    trace = load_trace(out)
    direct, _ = import_alibaba(PODS, NODES, seed=2)
    assert trace == direct
    assert run("trace", "show", str(out)).exit_code == 0
    shown = json.loads(run("trace", "show", str(out), "--json").output)
    assert shown["jobs"] == 51 and shown["nodes"] == 20
    assert {a["app"] for a in shown["jobs_by_app"]} == {"openb-1gpu", "openb-2gpu",
                                                       "openb-4gpu", "openb-8gpu",
                                                       "openb-share"}


def test_cli_json_summary(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    result = run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
                 "--out", str(out), "--sample", "30", "--max-nodes", "10", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["jobs"] == 30 and doc["nodes"] == 10 and doc["out"] == str(out)
    assert doc["pods"] - doc["jobs"] == sum(doc["dropped"].values())


def test_imported_trace_simulates_with_packing_policies(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    assert run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
               "--out", str(out), "--max-nodes", "6", "--load", "0.5",
               "--seed", "1").exit_code == 0
    result = run("simulate", "--trace", str(out), "--policies", "first-fit,ojpp-heuristic",
                 "--period-s", "0", "--json", "--no-plots", "--out", str(tmp_path / "sim"))
    assert result.exit_code == 0, result.output
    start = result.output.index("[")
    results = {r["policy"]: r for r in json.loads(result.output[start:])}
    trace = load_trace(out)
    for r in results.values():
        assert r["device_hours"] > 0 and 0 < r["gpu_utilization"] <= 1
        assert r["energy_kwh"] > 0 and r["starts"] >= len(trace.jobs)


def test_unreachable_busy_share_names_the_option(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
                 "--out", str(out), "--busy-share", "50")
    assert result.exit_code == 2
    assert result.output.startswith("andreas: error: --busy-share: must be < ")
    assert result.output.endswith("got 50\n") and not out.exists()   # one whole line


def test_load_is_the_offered_load_trace_show_reports(tmp_path: Path) -> None:
    """--load 1.5 was refused (it meant the busy share, < 0.22 here) and --load 0.2 gave
    an offered load of 72; now it is what `trace show` calls load."""
    for load in (0.2, 1.5, 3.0):
        out = tmp_path / f"t{load}.json"
        result = run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
                     "--out", str(out), "--load", str(load))
        assert result.exit_code == 0, result.output
        shown = json.loads(run("trace", "show", str(out), "--json").output)
        assert shown["load"] == pytest.approx(load, rel=1e-6)
        assert f"for offered load {load:g}" in result.output
    default, report = import_alibaba(PODS, NODES)
    assert report.offered == pytest.approx(1.0, rel=1e-6)     # where placement matters
    _, kept = import_alibaba(PODS, NODES, keep_times=True)
    assert kept.offered < 0.5 and "placement hardly matters" in " ".join(kept.notes)
    with pytest.raises(InputError, match="load: cannot be combined with keep_times"):
        import_alibaba(PODS, NODES, load=1.0, keep_times=True)


def test_since_replays_the_window_from_then_on() -> None:
    trace, report = import_alibaba(PODS, NODES, since=10_000_000, keep_times=True)
    # 38 GPU pods were created before 1e7 s; 14 of them had ended by then (counted by hand)
    assert report.dropped == {"cpu-only": 4, "pending": 3, "ended before --since": 14}
    assert report.jobs == 37 and report.time_scale == 1.0
    jobs = {j.id: j for j in trace.jobs}
    survivor = jobs["openb-pod-0000"]            # scheduled at 0, deleted at 12537496
    assert survivor.submit_s == 0 and survivor.epochs == math.ceil(2_537_496 / 600)
    assert survivor.due_s == 2 * 2_537_496
    assert jobs["openb-pod-0062"].submit_s == 10001573 - 10_000_000
    assert "openb-pod-0033" not in jobs
    # the synthetic GPU memory of a pod does not depend on the window
    full, _ = import_alibaba(PODS, NODES)
    assert jobs["openb-pod-0001"].demand == next(j.demand for j in full.jobs
                                                  if j.id == "openb-pod-0001")


def test_bad_since_names_the_option(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
                 "--out", str(out), "--since", "-1")
    assert result.exit_code == 2
    assert result.output.strip() == "andreas: error: --since: must be a time >= 0 (seconds of " \
                                    "the trace), got -1.0"
    result = run("trace", "import-alibaba", "--pods", str(PODS), "--nodes", str(NODES),
                 "--out", str(out), "--since", "2e7")
    assert result.output.strip() == "andreas: error: --since: every GPU pod ended by 2e+07"
    assert not out.exists()


# --------------------------------------------------------------------------- variants

def test_every_published_pod_list_here_imports(tmp_path: Path) -> None:
    """Every openb_pod_list_*.csv of the shared folder (the default one; the repository
    publishes 24, two header shapes: the multigpu* ones below)."""
    lists = sorted(SHARED.glob("openb_pod_list_*.csv"))
    assert lists, f"no pod lists under {SHARED} (the shared data folder, ../shared)"
    for pods in lists:
        out = tmp_path / f"{pods.stem}.json"
        result = run("trace", "import-alibaba", "--pods", str(pods), "--nodes",
                     str(SHARED / "openb_node_list_gpu_node.csv"), "--out", str(out),
                     "--sample", "300", "--max-nodes", "40", "--json")
        assert result.exit_code == 0, (pods.name, result.output)
        doc = json.loads(result.output)
        assert doc["jobs"] == 300 and doc["offered"] == pytest.approx(1.0, rel=1e-6)


def test_a_pod_list_without_times_arrives_in_file_order_and_says_so(tmp_path: Path) -> None:
    """openb_pod_list_multigpu50.csv has name,cpu_milli,memory_mib,num_gpu,gpu_milli only:
    it was refused ("header lacks column gpu_spec")."""
    out = tmp_path / "m.json"
    result = run("trace", "import-alibaba", "--pods", str(MULTI), "--nodes", str(NODES),
                 "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "no time columns: tasks arrive in file order every" in result.output
    assert "has no time, qos or phase columns: every task runs 3600 s" in result.output
    trace = load_trace(out)
    gpu_rows = [r.split(",")[0] for r in rows(MULTI)[1:] if r.split(",")[3] != "0"]
    by_submit = sorted(trace.jobs, key=lambda j: j.submit_s)
    assert [j.id for j in by_submit] == [i for i in gpu_rows if i in {j.id for j in trace.jobs}]
    gaps = {round(b.submit_s - a.submit_s, 2) for a, b in zip(by_submit, by_submit[1:])}
    assert summary(trace)["load"] == pytest.approx(1.0, rel=1e-4)        # the default
    assert all(j.epochs * next(iter(j.epoch_time_s.values()))[0] == pytest.approx(3600, abs=1)
               for j in trace.jobs)
    assert all(j.weight == pytest.approx(QOS_WEIGHT["LS"] * WEIGHT_UNIT) for j in trace.jobs)
    # at a chosen rate: 120 per hour, one every 30 s of file order (CPU-only rows skipped)
    rated, report = import_alibaba(MULTI, NODES, arrival_rate_per_h=120, duration_s=600)
    index = {r.split(",")[0]: i for i, r in enumerate(rows(MULTI)[1:])}
    first = min(index[j.id] for j in rated.jobs)
    assert all(j.submit_s == pytest.approx(30.0 * (index[j.id] - first)) for j in rated.jobs)
    assert "(120 per hour)" in report.spacing and len(gaps) >= 1
    for bad, message in ((dict(keep_times=True), "no time columns: there are no times"),
                         (dict(since=5.0), "has no time columns"),
                         (dict(busy_share="full"), "no time columns")):
        with pytest.raises(InputError, match=message):
            import_alibaba(MULTI, NODES, **bad)
    with pytest.raises(InputError, match="arrival_rate_per_h: the pod list has creation"):
        import_alibaba(PODS, NODES, arrival_rate_per_h=10)
