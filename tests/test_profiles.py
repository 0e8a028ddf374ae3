"""profiles/: every number has a source, the power and speed-up models are the documented ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from andreas import profiles as prof
from andreas.errors import InputError
from andreas.profiles import DEFAULT_DIR, load_profiles

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_TRACE = ROOT / "examples" / "example-exp-n10.json"


@pytest.fixture(scope="module")
def p() -> prof.Profiles:
    return load_profiles()


def test_default_dir_is_the_repos_profiles(p: prof.Profiles) -> None:
    assert DEFAULT_DIR == ROOT / "profiles"
    assert load_profiles(ROOT / "profiles") == p
    assert {"V100", "T4", "K80", "M60"} <= set(p.gpus)
    assert {"V100", "T4", "default"} <= set(p.hosts)
    assert len(p.apps) >= 5


def test_every_number_has_a_source(p: prof.Profiles) -> None:
    for entry in (*p.gpus.values(), *p.hosts.values()):
        for field in ("idle_w", "busy_w"):
            assert len(entry.sources[field].strip()) > 20, (entry.name, field)
    for app in p.apps.values():
        assert app.sources["epochs"].strip() and app.sources["serial_fraction"].strip()
        src = app.sources["epoch_s"]
        for gpu_type in app.epoch_s:
            text = src if isinstance(src, str) else src[gpu_type]
            assert len(text.strip()) > 20, (app.name, gpu_type)


def test_honest_about_estimates(p: prof.Profiles) -> None:
    """Idle readings and host numbers are not datasheet values and say so; a busy figure
    names its datasheet or says it was measured here."""
    for gpu in p.gpus.values():
        assert "not a datasheet value" in gpu.sources["idle_w"]
        busy = gpu.sources["busy_w"]
        assert "datasheet" in busy or busy.startswith("Measured here"), busy
    for name in ("V100", "T4"):
        assert "Estimate" in p.hosts[name].sources["idle_w"]


@pytest.mark.parametrize("gpu_type", ["V100", "T4", "K80", "M60", "H200"])
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_node_power_is_the_documented_model_and_monotone(p, gpu_type: str, gpus: int) -> None:
    curve = p.node_power_w(gpu_type, gpus)
    gpu, host = p.gpus[gpu_type], p.host(gpu_type)
    assert len(curve) == gpus + 1
    for g, watts in enumerate(curve):
        expected = (host.idle_w + (host.busy_w - host.idle_w) * g / gpus
                    + gpus * gpu.idle_w + g * (gpu.busy_w - gpu.idle_w))
        assert watts == pytest.approx(expected, abs=1e-3)
    assert all(b > a for a, b in zip(curve, curve[1:]))
    assert prof.node_power_w(gpu_type, gpus) == curve


def test_host_falls_back_to_default(p) -> None:
    assert p.host("K80") == p.hosts["default"]


def test_power_close_to_the_andreas_example(p) -> None:
    """Consistency check, not equality: the example's curves come from another source."""
    doc = json.loads(EXAMPLE_TRACE.read_text())
    for node in doc["nodes"]:
        ours = p.node_power_w(node["gpu_type"], node["gpus"])
        for a, b in zip(ours, node["power_w"]):
            assert abs(a - b) / b <= 0.10, (node["name"], ours, node["power_w"])


def test_epoch_times_are_sublinear_amdahl(p) -> None:
    for app in p.apps.values():
        for gpu_type, t1 in app.epoch_s.items():
            times = p.epoch_times(app.name, gpu_type, 8)
            assert times[0] == t1
            assert all(b < a for a, b in zip(times, times[1:]))       # more GPUs help ...
            assert all(g * t > t1 for g, t in enumerate(times[1:], start=2))  # ... sub-linearly
            s = app.serial_fraction
            assert times[3] == pytest.approx(t1 * (s + (1 - s) / 4), abs=1e-3)
    assert prof.epoch_times("lstm", "V100", 2) == p.epoch_times("lstm", "V100", 2)


def test_reproduces_the_example_traces_epoch_times(p) -> None:
    doc = json.loads(EXAMPLE_TRACE.read_text())
    for job in doc["jobs"]:
        for gpu_type, times in job["epoch_time_s"].items():
            assert list(p.epoch_times(job["app"], gpu_type, len(times))) == times, job["id"]


def test_m60_faster_than_k80(p) -> None:
    for app in p.apps.values():
        assert app.epoch_s["M60"] < app.epoch_s["K80"]


def test_unknown_names(p) -> None:
    with pytest.raises(InputError, match="gpus.toml.*H100"):
        p.node_power_w("H100", 2)
    with pytest.raises(InputError, match="apps.toml.*bert"):
        p.epoch_times("bert", "V100", 2)


# --------------------------------------------------------------------------- bad files

def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "profiles"
    shutil.copytree(DEFAULT_DIR, target)
    return target


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("file, old, new, words", [
    ("gpus.toml", 'idle_w = "Typical idle reading', 'idle_x = "Typical idle reading',
     ("gpus.toml", "entry V100", "source.idle_w", "needs a source")),
    ("gpus.toml", "idle_w = 35.0", "idle_w = -35.0", ("entry V100", "idle_w", ">= 0")),
    ("gpus.toml", "busy_w = 70.0", "busy_w = 5.0", ("entry T4", "busy_w", "idle_w")),
    ("gpus.toml", "idle_w = 35.0", 'idle_w = "35"', ("entry V100", "idle_w", "number")),
    ("gpus.toml", "idle_w = 35.0", "idle_w = 35.0\ncolour = 1", ("entry V100", "colour")),
    ("hosts.toml", "busy_w = 240.0", "", ("hosts.toml", "entry V100", "busy_w", "missing")),
    ("apps.toml", "serial_fraction = 0.10957", "serial_fraction = 1.5",
     ("apps.toml", "entry resnet50", "serial_fraction")),
    ("apps.toml", "epochs = [20, 200]", "epochs = [200, 20]", ("entry resnet50", "epochs[1]")),
    ("apps.toml", "V100 = 600.0", "V100 = 600.0\nH100 = 100.0",
     ("entry resnet50", "epoch_s.H100")),
    ("apps.toml", 'T4 = "Example trace: 1-GPU T4 epoch time of resnet50."', "",
     ("entry resnet50", "source.epoch_s.T4")),
    ("apps.toml", "[resnet50]", "[resnet50", ("apps.toml", "not TOML")),
], ids=["no-source", "negative", "busy-below-idle", "string", "unknown-field", "missing",
        "serial", "epoch-range", "unknown-type", "no-source-in-table", "not-toml"])
def test_bad_profile_is_one_line_naming_file_entry_field(tmp_path: Path, file, old, new,
                                                          words) -> None:
    root = _copy(tmp_path)
    _edit(root / file, old, new)
    with pytest.raises(InputError) as err:
        load_profiles(root)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_missing_file(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "hosts.toml").unlink()
    with pytest.raises(InputError, match="hosts.toml: cannot read"):
        load_profiles(root)
