"""andreas-trace/1: exact round trips, atomic writes, and one-line errors for bad traces."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from andreas.cli import main
from andreas.errors import InputError
from andreas.simulator.generate import generate_trace
from andreas.formats.trace import (TRACE_FORMAT, dump_trace, load_trace, parse_trace, summary,
                           trace_to_dict)

from tests.paths import SHARED as SHARED_DIR

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "example-exp-n10.json"
SHARED = SHARED_DIR / "traces" / "example-exp-n10.json"


def example_doc() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text())


def cloud_doc() -> dict[str, Any]:
    return trace_to_dict(generate_trace(n_nodes=2, seed=3, cloud=True, jobs_per_node=2))


def test_example_loads() -> None:
    t = load_trace(EXAMPLE)
    assert t.name == "exponential-n10-sc1-paper-s101" and not t.cloud
    assert len(t.jobs) == 100 and len(t.nodes) == 10
    assert [j.submit_s for j in t.jobs] == sorted(j.submit_s for j in t.jobs)
    assert t.nodes[0].power_w == (280.0, 490.0, 700.0)
    assert t.jobs[0].epoch_time_s["V100"] == (300.0, 178.381)


def test_shared_example_loads_and_equals_the_copy() -> None:
    """The project's copy is the shared example; where ../shared is there, check both."""
    for path in [EXAMPLE] + ([SHARED] if SHARED.exists() else []):
        assert load_trace(path) == load_trace(EXAMPLE)
        assert json.loads(path.read_text()) == example_doc()


def test_round_trip_is_exact(tmp_path: Path) -> None:
    t = load_trace(EXAMPLE)
    assert parse_trace(trace_to_dict(t)) == t
    assert trace_to_dict(t) == example_doc()          # the very same JSON values
    dump_trace(t, tmp_path / "t.json")
    assert load_trace(tmp_path / "t.json") == t


@pytest.mark.parametrize("kwargs", [dict(n_nodes=7, seed=1), dict(n_nodes=4, seed=2, scenario=2),
                                    dict(n_nodes=3, seed=5, cloud=True, arrival="mixed")])
def test_generated_round_trip(tmp_path: Path, kwargs) -> None:
    t = generate_trace(**kwargs)
    assert parse_trace(trace_to_dict(t)) == t
    dump_trace(t, tmp_path / "g.json")
    assert load_trace(tmp_path / "g.json") == t
    text = (tmp_path / "g.json").read_text()
    assert text.count("\n") >= len(t.jobs) + len(t.nodes)   # one object per line


def test_cloud_trace_has_catalog_and_bare_nodes() -> None:
    doc = cloud_doc()
    assert len(doc["catalog"]) == 8
    assert all(set(n) == {"name"} for n in doc["nodes"])
    t = parse_trace(doc)
    assert t.cloud and all(n.gpu_type is None and n.gpus == 0 for n in t.nodes)


def test_cloud_node_may_start_with_a_vm() -> None:
    doc = cloud_doc()
    doc["nodes"][0]["config"] = "NV24"
    t = parse_trace(doc)
    assert t.nodes[0].config == "NV24" and parse_trace(trace_to_dict(t)) == t


def test_jobs_are_sorted_stably_by_submit_time() -> None:
    doc = example_doc()
    doc["jobs"] = doc["jobs"][:4]
    doc["jobs"][0]["submit_s"] = 50_000.0
    doc["jobs"][2]["submit_s"] = doc["jobs"][3]["submit_s"]   # a tie keeps the file's order
    t = parse_trace(doc)
    assert [j.id for j in t.jobs] == ["j00002", "j00003", "j00004", "j00001"]


def test_optional_sections_take_defaults() -> None:
    doc = example_doc()
    del doc["energy"], doc["params"], doc["name"]
    t = parse_trace(doc)
    assert t.energy.pue == 1.33 and t.params.rho == 100 and t.name == ""


def test_summary_of_the_example() -> None:
    s = summary(load_trace(EXAMPLE))
    assert s["jobs"] == 100 and s["gpus"] == 15
    assert s["mean_interarrival_s"] == pytest.approx(717679.003 / 99)
    assert 0.2 < s["load"] < 1.0


# --------------------------------------------------------------------------- atomic writes

def test_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    t = load_trace(EXAMPLE)
    target = tmp_path / "t.json"
    target.write_text("previous content")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(InputError, match="cannot write: No space left"):
        dump_trace(t, target)
    assert target.read_text() == "previous content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_write_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot write"):
        dump_trace(load_trace(EXAMPLE), tmp_path / "no" / "t.json")


# --------------------------------------------------------------------------- bad input

def _bad(doc: dict, mutate) -> dict:
    doc = copy.deepcopy(doc)
    mutate(doc)
    return doc


def _dup_job(d: dict) -> None:
    d["jobs"][5]["id"] = "j00002"


BAD = [
    ("format", _bad(example_doc(), lambda d: d.update(format="andreas-trace/2")),
     ("trace", "format", "andreas-trace/2")),
    ("snapshot-format", _bad(example_doc(), lambda d: d.update(format="andreas-snapshot/1")),
     ("trace", "format", "andreas-snapshot/1")),
    ("no-format", _bad(example_doc(), lambda d: d.pop("format")), ("trace", "format", "missing")),
    ("fits-no-node", _bad(example_doc(), lambda d: d["jobs"][1].update(
        epoch_time_s={"H100": [1.0]})), ("job j00002", "epoch_time_s", "fits no node")),
    ("unknown-type", _bad(example_doc(), lambda d: d["jobs"][1]["epoch_time_s"].update(
        A100=[1.0])), ("job j00002", "epoch_time_s", "A100")),
    ("power-length", _bad(example_doc(), lambda d: d["nodes"][3].update(power_w=[1.0])),
     ("node n004", "power_w", "gpus+1")),
    ("power-negative", _bad(example_doc(), lambda d: d["nodes"][0].update(
        power_w=[-1.0, 2.0, 3.0])), ("node n001", "power_w[0]", "-1")),
    ("duplicate-job", _bad(example_doc(), _dup_job), ("job j00002", "id", "duplicates")),
    ("duplicate-node", _bad(example_doc(), lambda d: d["nodes"][3].update(name="n001")),
     ("node n001", "name", "duplicates")),
    ("negative-submit", _bad(example_doc(), lambda d: d["jobs"][0].update(submit_s=-5.0)),
     ("job j00001", "submit_s", "-5")),
    ("due-before-submit", _bad(example_doc(), lambda d: d["jobs"][3].update(due_s=1.0)),
     ("job j00004", "due_s", "submit_s")),
    ("negative-weight", _bad(example_doc(), lambda d: d["jobs"][0].update(weight=-0.1)),
     ("job j00001", "weight", "-0.1")),
    ("zero-epochs", _bad(example_doc(), lambda d: d["jobs"][0].update(epochs=0)),
     ("job j00001", "epochs", "got 0")),
    ("negative-epoch-time", _bad(example_doc(), lambda d: d["jobs"][0]["epoch_time_s"].update(
        T4=[-800.0])), ("job j00001", "epoch_time_s.T4[0]", "-800")),
    ("epochs-done", _bad(example_doc(), lambda d: d["jobs"][2].update(epochs_done=3)),
     ("job j00003", "epochs_done", "not allowed in a trace")),
    ("running", _bad(example_doc(), lambda d: d["jobs"][2].update(
        running={"node": "n001", "gpus": 1})), ("job j00003", "running", "not allowed")),
    ("now-s", _bad(example_doc(), lambda d: d.update(now_s=5.0)), ("trace", "now_s")),
    ("no-jobs", _bad(example_doc(), lambda d: d.update(jobs=[])), ("trace", "jobs")),
    ("pue-string", _bad(example_doc(), lambda d: d["energy"].update(pue="high")),
     ("trace", "energy.pue", '"high"')),
    ("cloud-config", _bad(cloud_doc(), lambda d: d["nodes"][0].update(config="NC7")),
     ("node n001", "config", "NC7")),
    ("cloud-hardware", _bad(cloud_doc(), lambda d: d["nodes"][0].update(gpus=2)),
     ("node n001", "gpus")),
    ("array", [], ("trace", "JSON object")),
]


@pytest.mark.parametrize("doc, words", [(d, w) for _, d, w in BAD], ids=[i for i, _, _ in BAD])
def test_bad_trace_is_one_line_naming_object_and_field(doc, words) -> None:
    with pytest.raises(InputError) as err:
        parse_trace(doc)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _assert_one_line_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert err.startswith("andreas: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and result.exception is None or \
        isinstance(result.exception, SystemExit)
    for word in words:
        assert word in err, err


@pytest.mark.parametrize("doc, words", [(d, w) for _, d, w in BAD], ids=[i for i, _, _ in BAD])
def test_bad_trace_via_cli_exits_2(tmp_path: Path, doc, words) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    _assert_one_line_error(_run("trace", "show", str(path)), str(path), *words)


@pytest.mark.parametrize("content, words", [
    ("{not json", ("not JSON", "line 1")),
    ('{"format": "andreas-trace/1", "format": "x"}', ("appears twice",)),
    (b"\xff\xfe", ("not UTF-8",)),
])
def test_non_json_file_exits_2(tmp_path: Path, content, words) -> None:
    path = tmp_path / "bad.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(InputError):
        load_trace(path)
    _assert_one_line_error(_run("trace", "show", str(path)), "bad.json", *words)


def test_missing_file_exits_2(tmp_path: Path) -> None:
    _assert_one_line_error(_run("trace", "show", str(tmp_path / "nope.json")), "cannot read")


def test_format_tag_is_the_documented_one() -> None:
    assert TRACE_FORMAT == "andreas-trace/1"
    assert '"format": "andreas-trace/1"' in (ROOT / "docs" / "FORMAT.md").read_text()
