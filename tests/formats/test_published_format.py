"""The converter and parser of tests/benchmarks/bench_published.py, without the C++ build.

The benchmark writes the input files of the path-relinking paper's C++ program and
reads its schedule dump; these tests pin both formats on tiny, hand-checkable cases.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import math
import sys
from pathlib import Path

import pytest

from andreas.model import CatalogEntry, Job, Node, Trace
from andreas.simulator.generate import generate_trace

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_published.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_published", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module    # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


CATALOG = (CatalogEntry(name="NC6", gpu_type="K80", gpus=1, cost_per_hour=0.56),
           CatalogEntry(name="NC12", gpu_type="K80", gpus=2, cost_per_hour=1.13),
           CatalogEntry(name="NV6", gpu_type="M60", gpus=1, cost_per_hour=0.62))


def tiny_trace(app: str = "resnet50") -> Trace:
    jobs = (Job(id="b", app=app, submit_s=10.5, due_s=900.25, weight=0.01, epochs=3,
                epoch_time_s={"K80": (100.0, 60.0), "M60": (90.0,)}),
            Job(id="a", app=app, submit_s=0.0, due_s=1e4 / 3, weight=0.0075, epochs=2,
                epoch_time_s={"K80": (50.0, 30.0, 25.0)}))
    return Trace(nodes=(Node(name="n1"), Node(name="n2")), jobs=jobs, catalog=CATALOG,
                 name="tiny")


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_inputs_round_trip(bench, tmp_path):
    trace = tiny_trace()
    bench.write_inputs(trace, tmp_path)
    jobs = read(tmp_path / "Lof_Selectjobs.csv")
    assert [j["UniqueJobsID"] for j in jobs] == ["a", "b"]          # by submission time
    a = jobs[0]
    assert float(a["Deadline"]) == 1e4 / 3                           # floats exact
    assert (float(a["SubmissionTime"]), float(a["Tardinessweight"])) == (0.0, 0.0075)
    # job a runs on K80 only: NC6 with 1 GPU, NC12 with 1 or 2 (its third time has no VM)
    assert (float(a["MinExecTime"]), float(a["MaxExecTime"])) == (60.0, 100.0)
    times = read(tmp_path / "SelectJobs_times.csv")
    rows = {(t["UniqueJobsID"], t["VMtype"], int(t["nGPUs"])): t for t in times}
    assert sorted(k for k in rows if k[0] == "a") == [("a", "NC12", 1), ("a", "NC12", 2),
                                                      ("a", "NC6", 1)]
    b_nv6 = rows[("b", "NV6", 1)]
    assert (b_nv6["GPUtype"], int(b_nv6["max_nGPUs"]), float(b_nv6["cost"]),
            float(b_nv6["ExecutionTime"])) == ("M60", 1, 0.62, 270.0)
    assert float(rows[("b", "NC12", 2)]["ExecutionTime"]) == 180.0
    assert len(times) == 7                                         # a: 3, b: 3 on K80 + 1 on M60
    nodes = (tmp_path / "tNodes.csv").read_text().split()
    assert nodes == ["Nodes", "n1", "n2"]


def test_inputs_of_a_generated_cloud_trace(bench, tmp_path):
    trace = generate_trace(n_nodes=1, cloud=True, arrival="exponential", seed=3)
    bench.write_inputs(trace, tmp_path)
    jobs = read(tmp_path / "Lof_Selectjobs.csv")
    assert len(jobs) == len(trace.jobs) == 10
    by_id = {j.id: j for j in trace.jobs}
    for row in read(tmp_path / "SelectJobs_times.csv"):
        job = by_id[row["UniqueJobsID"]]
        g = int(row["nGPUs"])
        assert 1 <= g <= int(row["max_nGPUs"])
        assert float(row["ExecutionTime"]) == job.epochs * job.epoch_time_s[row["GPUtype"]][g - 1]


@pytest.mark.parametrize("app", ["a,b", 'q"uote', "two\nlines"])
def test_inputs_refuse_what_the_cpp_would_misread(bench, tmp_path, app):
    with pytest.raises(ValueError):
        bench.write_inputs(tiny_trace(app), tmp_path)


def test_inputs_refuse_on_premise_traces(bench, tmp_path):
    trace = generate_trace(n_nodes=2, arrival="exponential", seed=1)
    with pytest.raises(ValueError, match="cloud"):
        bench.write_inputs(trace, tmp_path)


def test_scale_load_divides_submissions_and_keeps_slack(bench):
    trace = bench.scale_load(tiny_trace(), 2.0)
    b = next(j for j in trace.jobs if j.id == "b")
    assert (b.submit_s, b.due_s) == (5.25, 5.25 + (900.25 - 10.5))
    assert trace.name == "tiny-load2"
    assert bench.scale_load(tiny_trace(), 1.5).name == "tiny-load1.5"
    with pytest.raises(ValueError):
        bench.scale_load(tiny_trace(), 0)


SCHEDULE_HEADER = ("n_iterate,sim_time,Application,Images,Epochs,Batchsize,Jobs,UniqueJobsID,"
                   "SubmissionTime,Deadline,Tardinessweight,MinExecTime,MaxExecTime,"
                   "ExecutionTime,CompletionPercent,StartTime,FinishTime,Nodes,VMType,GpuType,"
                   "GpuNumber,cost,Tardiness,VMcost,TardinessCost,TotalCost")


def schedule_row(it: int, job: str, done: float, tardiness: float, vm: float, tcost: float,
                 node: str = "n1") -> str:
    return (f"{it},{it * 100},app,0,3,0,app,{job},0,500,0.01,60,100,100,{done},0,0,{node},"
            f"NC6,K80,1,0.56,{tardiness},{vm},{tcost},{vm + tcost}")


def test_parse_schedule(bench):
    text = "\n".join([
        SCHEDULE_HEADER,
        schedule_row(1, "a", 40, 0, 1.5, 0),
        schedule_row(1, "b", 0, 0, 0, 0, node=""),                     # waiting
        schedule_row(2, "a", 99.99999995, 12.5, 2.25, 0.125),          # done, late
        schedule_row(2, "b", 100, 0, 0.75, 0),                         # done on time
        schedule_row(3, "c", 50, 0, 1, 0),                             # never finishes
    ]) + "\n"
    totals = bench.parse_schedule(text.splitlines(keepends=True))
    assert (totals.vm_cost, totals.tardiness_cost) == (5.5, 0.125)
    assert totals.total_cost == 5.625
    assert (totals.late_jobs, totals.completed, totals.decisions) == (1, 2, 3)


def test_decision_seconds(bench):
    assert bench.decision_seconds([10.0, 11.0, 13.0]) == (2, 1.5)
    k, mean = bench.decision_seconds([5.0])
    assert k == 0 and math.isnan(mean)


def test_schedule_file_names(bench):
    assert bench.schedule_file("EDF", 7) == "EDF_schedule.csv"
    assert bench.schedule_file("RandomGreedy", 7) == "RandomGreedy_schedule_7.csv"
    assert bench.schedule_file("PathRelinking", 0) == "PathRelinking_schedule_0.csv"


def test_missing_checkout_says_how_to_get_one(bench, tmp_path, monkeypatch):
    monkeypatch.delenv(bench.ENV_DIR, raising=False)
    monkeypatch.setattr(bench, "MIRROR", tmp_path / "no-mirror")
    with pytest.raises(bench.Unavailable, match="git clone .*GPUScheduler"):
        bench.locate_checkout(None)
    with pytest.raises(bench.Unavailable, match="not a GPUScheduler checkout"):
        bench.locate_checkout(tmp_path)


def test_summary_row_ratios(bench):
    key = (10, 1, 1.0)
    runs = {(*key, "cpp", "EDF"): {"total_cost": 100.0, "late_jobs": 2},
            (*key, "andreas", "edf"): {"total_cost": 100.004, "late_jobs": 2},
            (*key, "cpp", "RandomGreedy"): {"total_cost": 80.0, "cpu_s_per_decision": 0.2},
            (*key, "andreas", "rg"): {"total_cost": 76.0, "cpu_s_per_decision": 0.1},
            (*key, "andreas", "pr"): {"error": "boom"}}
    row = bench.summary_row(runs, key)
    assert row["rg_over_RG"] == pytest.approx(0.95)
    assert row["pr_over_RG"] is None
    assert row["edf_diff"] == pytest.approx(0.004)
    assert row["time_ratio_rg"] == pytest.approx(0.5)
    assert dataclasses.is_dataclass(bench.Task)


def test_schedule_slots(bench):
    text = "\n".join([SCHEDULE_HEADER,
                      schedule_row(1, "a", 40, 0, 1.5, 0),
                      schedule_row(1, "b", 0, 0, 0, 0, node=""),
                      schedule_row(2, "a", 100, 0, 1, 0, node="n2")]) + "\n"
    assert bench.schedule_slots(text.splitlines(keepends=True)) == {
        1: [("a", "n1", "NC6", 1)], 2: [("a", "n2", "NC6", 1)]}


def test_replay_bills_the_cpp_decisions(bench):
    job = Job(id="a", app="x", submit_s=0.0, due_s=100.0, weight=0.01, epochs=2,
              epoch_time_s={"K80": (90.0, 60.0)})
    trace = Trace(nodes=(Node(name="n1"),), jobs=(job,), catalog=CATALOG, name="one")
    # decision 1 (t = 0): job a alone on an NC12 with 2 GPUs: 120 s, 20 s late
    cost, why = bench.replay_cost(trace, {1: [("a", "n1", "NC12", 2)]})
    assert why is None
    assert cost == pytest.approx(120 * 1.13 / 3600 + 0.01 * 20)
    cost, why = bench.replay_cost(trace, {1: [("zz", "n1", "NC6", 1)]})
    assert cost is None and "zz" in why
