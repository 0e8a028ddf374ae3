"""andreas.formats.snapshot: valid documents become model objects, every bad one a one-line InputError."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from andreas.errors import InputError
from andreas.model import Config, Node, Snapshot
from andreas.formats.snapshot import (check_job_placement, load_snapshot, parse_job, parse_snapshot,
                              snapshot_to_dict)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "example-snapshot-n10.json"


def base_doc() -> dict[str, Any]:
    """Two nodes (2 x V100, 1 x T4), one running job, one queued job."""
    return {
        "format": "andreas-snapshot/1",
        "name": "tiny",
        "now_s": 1000.0,
        "energy": {"pue": 1.33, "price_per_kwh": 0.172},
        "params": {"rho": 100, "period_s": 3600},
        "nodes": [
            {"name": "n01", "gpu_type": "V100", "gpus": 2, "power_w": [300.0, 550.0, 800.0]},
            {"name": "n02", "gpu_type": "T4", "gpus": 1, "power_w": [150.0, 220.0]},
        ],
        "jobs": [
            {"id": "j1", "app": "resnet50", "submit_s": 0.0, "due_s": 50000.0, "weight": 0.01,
             "epochs": 30, "epoch_time_s": {"V100": [800.0, 450.0], "T4": [1900.0]},
             "epochs_done": 3, "running": {"node": "n01", "gpus": 2}},
            {"id": "j2", "app": "bert", "submit_s": 500.0, "due_s": 90000.0, "weight": 0.005,
             "epochs": 10, "epoch_time_s": {"T4": [600.0]}},
        ],
    }


CATALOG = [  # the path-relinking paper's Azure VMs
    ("NC6", "K80", 1, 0.56), ("NC12", "K80", 2, 1.13), ("NC24", "K80", 4, 2.25),
    ("NV6", "M60", 1, 0.62), ("NV12", "M60", 2, 1.24), ("NV24", "M60", 4, 2.48),
]


def cloud_doc() -> dict[str, Any]:
    return {
        "format": "andreas-snapshot/1",
        "name": "cloud",
        "now_s": 7200.0,
        "catalog": [{"name": n, "gpu_type": t, "gpus": g, "cost_per_hour": c}
                    for n, t, g, c in CATALOG],
        "nodes": [{"name": "vm1", "config": "NC12"}, {"name": "vm2"}, {"name": "vm3"}],
        "jobs": [
            {"id": "c1", "app": "vgg", "submit_s": 0.0, "due_s": 30000.0, "weight": 0.02,
             "epochs": 20, "epoch_time_s": {"K80": [900.0, 500.0, 300.0, 200.0],
                                            "M60": [700.0, 400.0]},
             "epochs_done": 5, "running": {"node": "vm1", "gpus": 2}},
            {"id": "c2", "submit_s": 3600.0, "due_s": 20000.0, "weight": 0.01, "epochs": 5,
             "epoch_time_s": {"M60": [1000.0]}},
        ],
    }


def job(doc: dict, i: int = 0) -> dict:
    return doc["jobs"][i]


def node(doc: dict, i: int = 0) -> dict:
    return doc["nodes"][i]


def _set(get: Callable[[dict], dict], key: str, value: Any) -> Callable[[dict], None]:
    return lambda d: get(d).__setitem__(key, value)


def _del(get: Callable[[dict], dict], key: str) -> Callable[[dict], None]:
    return lambda d: get(d).pop(key)


# (case id, document builder, mutation, words the message must contain: object and field)
CASES: list[tuple[str, Callable[[], dict], Callable[[dict], None], tuple[str, ...]]] = [
    ("format-wrong", base_doc, _set(lambda d: d, "format", "andreas-trace/1"),
     ("snapshot", "format", "andreas-trace/1")),
    ("format-missing", base_doc, _del(lambda d: d, "format"), ("snapshot", "format", "missing")),
    ("now-missing", base_doc, _del(lambda d: d, "now_s"), ("snapshot", "now_s", "missing")),
    ("nodes-missing", base_doc, _del(lambda d: d, "nodes"), ("snapshot", "nodes", "missing")),
    ("jobs-missing", base_doc, _del(lambda d: d, "jobs"), ("snapshot", "jobs", "missing")),
    ("jobs-not-list", base_doc, _set(lambda d: d, "jobs", {"j1": {}}), ("snapshot", "jobs", "list")),
    ("nodes-empty", base_doc, _set(lambda d: d, "nodes", []), ("snapshot", "nodes", "non-empty")),
    ("unknown-top-field", base_doc, _set(lambda d: d, "jobz", []), ("snapshot", "jobz", "unknown")),
    ("job-missing-epochs", base_doc, _del(job, "epochs"), ("job j1", "epochs", "missing")),
    ("job-missing-due", base_doc, _del(job, "due_s"), ("job j1", "due_s", "missing")),
    ("job-missing-id", base_doc, _del(job, "id"), ("jobs[0]", "id", "missing")),
    ("job-typo-field", base_doc, _set(job, "epoch_done", 3), ("job j1", "epoch_done", "unknown")),
    ("due-string", base_doc, _set(job, "due_s", "tomorrow"),
     ("job j1", "due_s", "must be a number", '"tomorrow"')),
    ("due-bool", base_doc, _set(job, "due_s", True), ("job j1", "due_s", "number", "true")),
    ("due-nan", base_doc, _set(job, "due_s", float("nan")), ("job j1", "due_s", "finite", "NaN")),
    ("weight-inf", base_doc, _set(job, "weight", float("inf")), ("job j1", "weight", "finite")),
    ("submit-huge-int", base_doc, _set(job, "submit_s", 10**400), ("job j1", "submit_s", "finite")),
    ("epochs-zero", base_doc, _set(job, "epochs", 0), ("job j1", "epochs", ">= 1", "got 0")),
    ("epochs-negative", base_doc, _set(job, "epochs", -4), ("job j1", "epochs", ">= 1")),
    ("epochs-fraction", base_doc, _set(job, "epochs", 2.5), ("job j1", "epochs", "integer", "2.5")),
    ("epochs-bool", base_doc, _set(job, "epochs", True), ("job j1", "epochs", "integer")),
    ("epochs-done-negative", base_doc, _set(job, "epochs_done", -1),
     ("job j1", "epochs_done", ">= 0", "-1")),
    ("epochs-done-too-many", base_doc, _set(job, "epochs_done", 31),
     ("job j1", "epochs_done", "<= epochs (30)", "31")),
    ("weight-negative", base_doc, _set(job, "weight", -0.5), ("job j1", "weight", ">= 0", "-0.5")),
    ("submit-after-now", base_doc, _set(job, "submit_s", 2000.0),
     ("job j1", "submit_s", "now_s", "2000")),
    ("app-not-string", base_doc, _set(job, "app", 7), ("job j1", "app", "string")),
    ("id-with-space", base_doc, _set(job, "id", "j 1"), ("jobs[0]", "id", "spaces")),
    ("job-not-object", base_doc, lambda d: d["jobs"].__setitem__(1, "j2"),
     ("jobs[1]", "object")),
    ("node-zero-gpus", base_doc, _set(node, "gpus", 0), ("node n01", "gpus", ">= 1", "got 0")),
    ("node-missing-gpus", base_doc, _del(node, "gpus"), ("node n01", "gpus", "missing")),
    ("node-missing-type", base_doc, _del(node, "gpu_type"), ("node n01", "gpu_type", "missing")),
    ("power-length", base_doc, _set(node, "power_w", [300.0, 550.0]),
     ("node n01", "power_w", "3 entries")),
    ("power-negative", base_doc, _set(node, "power_w", [300.0, -550.0, 800.0]),
     ("node n01", "power_w[1]", "> 0", "-550")),
    ("power-not-list", base_doc, _set(node, "power_w", 800), ("node n01", "power_w", "list")),
    ("node-config-on-premise", base_doc, _set(node, "config", "NC6"),
     ("node n01", "config", "unknown")),
    ("duplicate-node", base_doc, _set(lambda d: node(d, 1), "name", "n01"),
     ("node n01", "name", "duplicates nodes[0]")),
    ("duplicate-job", base_doc, _set(lambda d: job(d, 1), "id", "j1"),
     ("job j1", "id", "duplicates jobs[0]")),
    ("unknown-gpu-type", base_doc,
     lambda d: job(d, 1)["epoch_time_s"].__setitem__("A100", [300.0]),
     ("job j2", "epoch_time_s", '"A100"', "known: T4, V100")),
    ("epoch-time-zero", base_doc, _set(job, "epoch_time_s", {"V100": [0.0, 450.0]}),
     ("job j1", "epoch_time_s.V100[0]", "> 0")),
    ("epoch-time-negative", base_doc, _set(lambda d: job(d, 1), "epoch_time_s", {"T4": [-1]}),
     ("job j2", "epoch_time_s.T4[0]", "> 0")),
    ("epoch-time-not-list", base_doc, _set(lambda d: job(d, 1), "epoch_time_s", {"T4": 600.0}),
     ("job j2", "epoch_time_s.T4", "list", "600")),
    ("epoch-time-empty-list", base_doc, _set(lambda d: job(d, 1), "epoch_time_s", {"T4": []}),
     ("job j2", "epoch_time_s.T4", "non-empty")),
    ("epoch-time-not-object", base_doc, _set(job, "epoch_time_s", [800.0]),
     ("job j1", "epoch_time_s", "object")),
    ("epoch-time-empty", base_doc, _set(job, "epoch_time_s", {}),
     ("job j1", "epoch_time_s", "at least one")),
    ("running-unknown-node", base_doc, _set(job, "running", {"node": "n99", "gpus": 1}),
     ("job j1", "running.node", "unknown", "n99")),
    ("running-zero-gpus", base_doc, _set(job, "running", {"node": "n01", "gpus": 0}),
     ("job j1", "running.gpus", ">= 1")),
    ("running-too-many-gpus", base_doc, _set(job, "running", {"node": "n01", "gpus": 3}),
     ("job j1", "running.gpus", "<= 2")),
    ("running-no-epoch-time", base_doc, _set(job, "epoch_time_s", {"V100": [800.0], "T4": [1.0]}),
     ("job j1", "running.gpus", "no epoch time", "2 x V100")),
    ("running-missing-gpus", base_doc, _set(job, "running", {"node": "n01"}),
     ("job j1", "running.gpus", "missing")),
    ("running-not-object", base_doc, _set(job, "running", "n01"), ("job j1", "running", "object")),
    ("running-overfull-node", base_doc,
     lambda d: job(d, 1).update(epoch_time_s={"V100": [100.0]}, running={"node": "n01", "gpus": 1}),
     ("node n01", "3 GPUs", "has 2")),
    ("pue-zero", base_doc, _set(lambda d: d["energy"], "pue", 0), ("snapshot", "energy.pue", ">= 1")),
    ("price-negative", base_doc, _set(lambda d: d["energy"], "price_per_kwh", -0.1),
     ("snapshot", "energy.price_per_kwh", "> 0")),
    ("rho-zero", base_doc, _set(lambda d: d["params"], "rho", 0), ("snapshot", "params.rho", "> 0")),
    ("period-string", base_doc, _set(lambda d: d["params"], "period_s", "1h"),
     ("snapshot", "params.period_s", "number", '"1h"')),
    ("mu-negative", base_doc, _set(lambda d: d["params"], "mu", -1), ("snapshot", "params.mu", ">= 0")),
    ("energy-not-object", base_doc, _set(lambda d: d, "energy", 1.33), ("snapshot", "energy", "object")),
    ("cloud-unknown-config", cloud_doc, _set(lambda d: node(d, 1), "config", "NC7"),
     ("node vm2", "config", '"NC7"', "NC12")),
    ("cloud-node-hardware", cloud_doc, _set(node, "gpus", 2), ("node vm1", "gpus", "unknown")),
    ("cloud-unknown-gpu-type", cloud_doc,
     lambda d: job(d, 1)["epoch_time_s"].__setitem__("V100", [1.0]),
     ("job c2", "epoch_time_s", "V100", "K80, M60", "catalog entry")),
    ("cloud-running-no-config", cloud_doc, _set(job, "running", {"node": "vm2", "gpus": 1}),
     ("job c1", "running.node", "config")),
    ("cloud-running-too-many", cloud_doc, _set(job, "running", {"node": "vm1", "gpus": 4}),
     ("job c1", "running.gpus", "<= 2")),
    ("catalog-zero-gpus", cloud_doc, lambda d: d["catalog"][0].__setitem__("gpus", 0),
     ("catalog entry NC6", "gpus", ">= 1")),
    ("catalog-free", cloud_doc, lambda d: d["catalog"][2].__setitem__("cost_per_hour", 0),
     ("catalog entry NC24", "cost_per_hour", "> 0")),
    ("catalog-duplicate", cloud_doc, lambda d: d["catalog"][1].__setitem__("name", "NC6"),
     ("catalog entry NC6", "name", "duplicates catalog[0]")),
    ("catalog-empty", cloud_doc, _set(lambda d: d, "catalog", []), ("snapshot", "catalog", "non-empty")),
]


def bad_doc(build: Callable[[], dict], mutate: Callable[[dict], None]) -> dict:
    doc = build()
    mutate(doc)
    return doc


@pytest.mark.parametrize("build, mutate, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_document_names_object_field_and_value(build, mutate, words) -> None:
    with pytest.raises(InputError) as info:
        parse_snapshot(bad_doc(build, mutate))
    message = str(info.value)
    assert "\n" not in message and message.strip() == message
    for word in words:
        assert word in message, message


def test_valid_documents_parse() -> None:
    s = parse_snapshot(base_doc())
    assert [j.id for j in s.jobs] == ["j1", "j2"]
    assert s.jobs[0].running == Config(node="n01", gpus=2)
    assert s.jobs[0].epochs_left == 27
    assert s.nodes[0].power_w == (300.0, 550.0, 800.0)
    assert s.params.rho == 100.0 and s.params.mu == 0.0 and not s.cloud


@pytest.mark.parametrize("doc", [base_doc(), None], ids=["object", "non-object"])
def test_top_level_must_be_an_object(doc) -> None:
    with pytest.raises(InputError, match="snapshot: must be a JSON object, got an array"):
        parse_snapshot([doc])


def test_defaults_for_energy_and_params_and_optional_mu() -> None:
    doc = base_doc()
    del doc["energy"], doc["params"], doc["name"]
    s = parse_snapshot(doc)
    assert (s.energy.pue, s.energy.price_per_kwh) == (1.33, 0.172)
    assert (s.params.rho, s.params.period_s, s.params.mu, s.name) == (100.0, 3600.0, 0.0, "")
    doc["params"] = {"mu": 0.5}
    assert parse_snapshot(doc).params.mu == 0.5


def test_finished_jobs_are_dropped() -> None:
    doc = base_doc()
    job(doc, 1)["epochs_done"] = job(doc, 1)["epochs"]
    assert [j.id for j in parse_snapshot(doc).jobs] == ["j1"]


def test_integral_floats_are_integers() -> None:
    doc = base_doc()
    job(doc)["epochs"] = 30.0
    node(doc)["gpus"] = 2.0
    s = parse_snapshot(doc)
    assert s.jobs[0].epochs == 30 and isinstance(s.jobs[0].epochs, int)
    assert s.nodes[0].gpus == 2


def test_idle_power_may_be_zero_but_busy_power_may_not() -> None:
    doc = base_doc()
    node(doc)["power_w"] = [0.0, 550.0, 800.0]
    assert parse_snapshot(doc).nodes[0].power_w[0] == 0.0
    node(doc)["power_w"] = [0.0, 0.0, 800.0]
    with pytest.raises(InputError, match=r"node n01: field 'power_w\[1\]' must be > 0"):
        parse_snapshot(doc)


def test_job_that_fits_no_node() -> None:
    """Unreachable from a document (unknown types fail first), so checked on the helper."""
    j = parse_job(job(base_doc(), 1), 1)
    with pytest.raises(InputError, match="job j2: field 'epoch_time_s' fits no node"):
        check_job_placement(j, (Node(name="n9", gpu_type="T4", gpus=0),))


def test_trace_jobs_have_no_progress_fields() -> None:
    raw = job(base_doc())
    with pytest.raises(InputError, match='job j1: unknown field "epochs_done"'):
        parse_job(raw, 0, progress=False)
    raw = {k: v for k, v in raw.items() if k not in ("epochs_done", "running")}
    assert parse_job(raw, 0, progress=False).epochs_done == 0


def test_example_snapshot() -> None:
    s = load_snapshot(EXAMPLE)
    assert len(s.jobs) == 40 and len(s.nodes) == 10
    raw = json.loads(EXAMPLE.read_text())
    running = {j["id"]: j["running"] for j in raw["jobs"] if "running" in j}
    assert running
    for j in s.jobs:
        if j.id in running:
            assert j.running == Config(node=running[j.id]["node"], gpus=running[j.id]["gpus"])
        else:
            assert j.running is None


@pytest.mark.parametrize("snapshot", [
    pytest.param(lambda: load_snapshot(EXAMPLE), id="example"),
    pytest.param(lambda: parse_snapshot(base_doc()), id="base"),
    pytest.param(lambda: parse_snapshot(cloud_doc()), id="cloud"),
])
def test_round_trip(snapshot) -> None:
    s = snapshot()
    doc = snapshot_to_dict(s)
    assert parse_snapshot(json.loads(json.dumps(doc))) == s
    assert parse_snapshot(doc) == s


def test_round_trip_keeps_mu() -> None:
    doc = base_doc()
    doc["params"]["mu"] = 0.25
    s = parse_snapshot(doc)
    assert parse_snapshot(snapshot_to_dict(s)) == s


def test_cloud_snapshot() -> None:
    s = parse_snapshot(cloud_doc())
    assert s.cloud
    assert [(c.name, c.gpu_type, c.gpus, c.cost_per_hour) for c in s.catalog] == CATALOG
    assert [(n.name, n.config) for n in s.nodes] == [("vm1", "NC12"), ("vm2", None), ("vm3", None)]
    assert all(n.gpu_type is None and n.gpus == 0 for n in s.nodes)
    assert s.jobs[0].running == Config(node="vm1", gpus=2)
    assert s.jobs[1].app == ""


# --------------------------------------------------------------------------- files

def test_load_errors_name_the_path(tmp_path: Path) -> None:
    cases = {
        "missing.json": None,
        "garbage.json": b"{not json",
        "latin1.json": b'{"name": "caf\xe9"}',
        "dupkey.json": b'{"now_s": 1, "now_s": 2}',
        "array.json": b"[1, 2]",
        "deep.json": b"[" * 100000 + b"]" * 100000,
    }
    expected = {"missing.json": "cannot read", "garbage.json": "not JSON", "latin1.json": "UTF-8",
                "dupkey.json": '"now_s" appears twice', "array.json": "must be a JSON object",
                "deep.json": "nested too deeply"}
    for name, content in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(InputError) as info:
            load_snapshot(path)
        message = str(info.value)
        assert message.startswith(f"{path}: ") and expected[name] in message, message
        assert "\n" not in message
    with pytest.raises(InputError, match="not a regular file"):
        load_snapshot(tmp_path)  # a directory


def test_load_prefixes_validation_errors_with_path(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    doc = base_doc()
    job(doc)["due_s"] = "tomorrow"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as info:
        load_snapshot(path)
    assert str(info.value) == f"{path}: job j1: field 'due_s' must be a number, got \"tomorrow\""


# --------------------------------------------------------------------------- fuzzing

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
    | st.sampled_from(["n01", "n02", "V100", "T4", "K80", "NC6", "j1", "andreas-snapshot/1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def mutated_docs(draw) -> dict:
    doc = draw(st.sampled_from([base_doc, cloud_doc]))()
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add", "number"]))
        if action == "number":  # plausible values reach the deeper checks
            parent[path[-1]] = draw(st.integers(min_value=-3, max_value=40)
                                    | st.floats(min_value=-1.0, max_value=1e6))
        elif action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["config", "mu", "running", "x", "epochs_done"]))] = draw(JSON_VALUES)
        else:
            parent[path[-1]] = draw(JSON_VALUES)
    return doc


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_docs())
def test_fuzz_parse_returns_snapshot_or_input_error(doc: dict) -> None:
    try:
        s = parse_snapshot(copy.deepcopy(doc))
    except InputError as e:
        assert "\n" not in str(e) and str(e)
    else:
        assert isinstance(s, Snapshot)
        assert parse_snapshot(snapshot_to_dict(s)) == s


def test_the_strict_loaders_refuse_a_repeated_key_naming_it_and_the_line():
    from andreas.formats.strict import RepeatedKey, json_loads, yaml_loads

    assert json_loads('{"a": {"b": 1}, "c": [{"b": 2}]}') == {"a": {"b": 1}, "c": [{"b": 2}]}
    with pytest.raises(RepeatedKey) as err:
        json_loads('{"a": {"b": 1, "b": 2}}')
    assert (err.value.key, err.value.line, str(err.value)) == ("b", None,
                                                               "key 'b' appears twice")
    assert yaml_loads("a: 1\nb: {c: 2}\n") == {"a": 1, "b": {"c": 2}}
    with pytest.raises(RepeatedKey) as err:
        yaml_loads("a: 1\nb:\n  c: 2\n  c: 3\n")
    assert (err.value.key, err.value.line, str(err.value)) == ("c", 4,
                                                               "line 4: key 'c' appears twice")
    with pytest.raises(RepeatedKey, match="^line 1: a key must be a plain value$"):
        yaml_loads("? [1, 2]\n: x\n")
