"""Submission parsing without a store: image references, due dates, ids, env, job.yaml."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from andreas.errors import InputError
from andreas.service.submit import (default_application, generate_id, load_job_file, parse_due,
                            parse_image, parse_submission)
from tests.jobs.conftest import NOW

SHA = "sha256:" + "a" * 64


@pytest.mark.parametrize("ref", [
    "busybox", "busybox:1.36", "library/busybox:latest", "andreas-example/train-numpy:latest",
    "registry.example.org/ml/resnet50:2", "localhost:5000/train", "localhost/train:v1",
    "10.0.0.1:5000/a/b/c:1.0-rc_1", f"train@{SHA}", f"reg.io/train:1@{SHA}",
    "a__b/c.d-e:T_AG", "a--b", "Registry.Example.org/ml/x"])
def test_valid_image_references(ref):
    assert parse_image(ref) == ref


@pytest.mark.parametrize("ref, why", [
    ("", "Docker image reference"),
    ("Busybox", "'Busybox' must be lower case"),
    ("ml/ResNet:1", "'ResNet' must be lower case"),
    ("busybox:", "tag ''"),
    ("busybox:.x", "tag '.x'"),
    ("busybox:" + "t" * 129, "tag"),
    ("busybox@sha256:abc", "digest"),
    (f"busybox@md5:{'a' * 64}", "digest"),
    ("a//b", "empty name component"),
    ("ml/-x", "'-x' may hold only"),
    ("ml/x_", "'x_' may hold only"),
    ("bad_host.io:99/x", "registry 'bad_host.io:99'"),
    ("ml/a b", "'a b'"),
])
def test_invalid_image_references_name_the_part(ref, why):
    with pytest.raises(InputError) as e:
        parse_image(ref)
    msg = str(e.value)
    assert msg.startswith(f"IMAGE {ref!r}:") and why in msg and "\n" not in msg


@pytest.mark.parametrize("ref, app", [
    ("andreas-example/train-numpy:latest", "train-numpy"), ("busybox", "busybox"),
    ("localhost:5000/ml/resnet50", "resnet50"), (f"reg.io/x/vgg19:2@{SHA}", "vgg19")])
def test_default_application_is_last_name_component(ref, app):
    assert default_application(ref) == app


@pytest.mark.parametrize("text, expected", [
    ("+12h", NOW + 12 * 3600), ("+30m", NOW + 1800), ("+2d", NOW + 2 * 86400),
    ("+90s", NOW + 90), ("+1h30m", NOW + 5400), ("+1.5h", NOW + 5400),
    ("2027-01-15T09:00:00Z", NOW + 3600), ("2027-01-15T09:00", NOW + 3600),   # naive = UTC
    ("2027-01-15 10:00+01:00", NOW + 3600), ("2027-01-15T09:00:00.5+00:00", NOW + 3600.5),
    (str(int(NOW) + 60), NOW + 60), (f"{NOW + 0.5:.1f}", NOW + 0.5)])
def test_due_forms(text, expected):
    assert parse_due(text, NOW) == pytest.approx(expected)


def test_due_yaml_scalars():
    naive = datetime(2027, 1, 15, 9, 0)
    assert parse_due(naive, NOW) == NOW + 3600
    aware = datetime(2027, 1, 15, 10, 0, tzinfo=timezone(timedelta(hours=1)))
    assert parse_due(aware, NOW) == NOW + 3600
    assert parse_due(int(NOW) + 7, NOW) == NOW + 7


@pytest.mark.parametrize("value, why", [
    ("+0h", "not in the future"), ("2027-01-15T07:59Z", "not in the future"),
    (str(int(NOW)), "not in the future"), ("+12", "unit s, m, h or d"), ("+h", "unit"),
    ("12h", "not +<n>"), ("tomorrow", "not +<n>"), ("2027-01-16", "a date alone"),
    (datetime(2027, 1, 16, tzinfo=UTC).date(), "a date alone"),
    (str(int(NOW * 1000)), "more than 10 years"), (True, "give +12h"), (float("inf"), "finite"),
])
def test_bad_due(value, why):
    with pytest.raises(InputError) as e:
        parse_due(value, NOW)
    assert why in str(e.value) and str(e.value).startswith("--due ")


def test_due_in_the_past_shows_both_times():
    with pytest.raises(InputError, match=r"2027-01-15 07:00Z is not in the future \(now "
                                         r"2027-01-15 08:00Z\)"):
        parse_due("2027-01-15T07:00Z", NOW)


def test_generated_id_is_utc_time_and_hex():
    assert generate_id(NOW, lambda n: "ab12cd"[: 2 * n]) == "20270115-080000-ab12cd"
    spec = parse_submission(image="x", epochs=1, due="+1h", weight=0, now_s=NOW,
                            token_hex=lambda n: "0f" * n)
    assert spec.id == "20270115-080000-0f0f0f"


def test_full_spec_from_options():
    spec = parse_submission(image="reg.io/ml/resnet50:2", epochs="30", due="+12h",
                            weight="0.01", cmd="python train.py --msg 'a b'",
                            env=["LR=0.1", "EMPTY=", "EQ=a=b"], max_gpus="2", grace_s="60",
                            name="my-job.1", now_s=NOW)
    assert spec.id == "my-job.1" and spec.application == "resnet50"
    assert spec.epochs == 30 and spec.due_s == NOW + 43200 and spec.weight == 0.01
    assert spec.command == ("python", "train.py", "--msg", "a b")
    assert spec.env_dict == {"LR": "0.1", "EMPTY": "", "EQ": "a=b"}
    assert spec.max_gpus == 2 and spec.grace_s == 60.0


BASE = dict(image="x", epochs="1", due="+1h", weight="1")


@pytest.mark.parametrize("field, value, label, why", [
    ("epochs", "0", "--epochs '0'", ">= 1"), ("epochs", "2.5", "--epochs '2.5'", "whole"),
    ("epochs", "x", "--epochs 'x'", "whole"), ("weight", "-1", "--weight '-1'", ">= 0"),
    ("weight", "nan", "--weight 'nan'", "finite"), ("weight", "inf", "--weight 'inf'", "finite"),
    ("max_gpus", "0", "--max-gpus '0'", ">= 1"), ("grace_s", "0", "--grace-s '0'", "> 0"),
    ("grace_s", "-3", "--grace-s '-3'", "> 0"), ("name", "-x", "--name '-x'", "job id"),
    ("name", "a/b", "--name 'a/b'", "job id"), ("name", "x" * 65, "--name 'xxx", "job id"),
    ("name", "a b", "--name 'a b'", "job id"), ("app", "re net", "--app 're net'", "application"),
    ("cmd", "python 'unclosed", "--cmd \"python 'unclosed\"", "shell"),
    ("env", ["1X=2"], "--env '1X'", "variable name"),
    ("env", ["NOEQ"], "--env 'NOEQ'", "NAME=VALUE"),
    ("env", ["ANDREAS_JOB_ID=x"], "--env 'ANDREAS_JOB_ID'", "set by andreas"),
    ("env", ["NVIDIA_VISIBLE_DEVICES=all"], "--env 'NVIDIA_VISIBLE_DEVICES'", "set by andreas"),
    ("env", ["A=1", "A=2"], "--env 'A'", "given twice"),
])
def test_bad_fields_name_field_and_value(field, value, label, why):
    with pytest.raises(InputError) as e:
        parse_submission(**{**BASE, field: value}, now_s=NOW)
    msg = str(e.value)
    assert msg.startswith(label) and why in msg and "\n" not in msg


def write(tmp_path, text: str):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_job_yaml_full(tmp_path):
    path = write(tmp_path, """
image: registry.example.org/ml/resnet50:2
epochs: 30
due: 2027-01-15T20:00:00Z
weight: 0.01
app: resnet
cmd: [python, train.py, "--lr", "0.1"]
env: {LR: "0.1", MODE: fast}
max_gpus: 2
grace_s: 300
name: yaml-job
""")
    spec = load_job_file(path, now_s=NOW)
    assert (spec.id, spec.application, spec.epochs, spec.weight) == ("yaml-job", "resnet", 30,
                                                                     0.01)
    assert spec.due_s == NOW + 12 * 3600
    assert spec.command == ("python", "train.py", "--lr", "0.1")
    assert spec.env_dict == {"LR": "0.1", "MODE": "fast"}
    assert (spec.max_gpus, spec.grace_s) == (2, 300.0)


def test_job_yaml_string_cmd_and_relative_due(tmp_path):
    path = write(tmp_path, "image: x\nepochs: 3\ndue: +2h\nweight: 1e-3\ncmd: train --a 'b c'\n")
    spec = load_job_file(path, now_s=NOW)
    assert spec.command == ("train", "--a", "b c") and spec.due_s == NOW + 7200
    assert spec.weight == 0.001


@pytest.mark.parametrize("text, why", [
    ("image: x\nepochs: 3\ndue: +2h\nweight: 1\ngpus: 2\n", "unknown key 'gpus'"),
    ("image: x\nepochs: 3\ndue: +2h\nweight: 1\nepochs: 4\n", "key 'epochs' appears twice"),
    ("image: x\nepochs: 3\ndue: +2h\n", "weight is missing"),
    ("image: x\nepochs: 3\ndue: +2h\nweight:\n", "weight is missing"),
    ("- image: x\n", "must be a mapping"),
    ("", "must be a mapping"),
    ("image: [x\n", "not valid YAML (line"),
    ("image: x\nepochs: true\ndue: +2h\nweight: 1\n", "epochs True: must be a whole number"),
    ("image: x\nepochs: 3.0\ndue: +2h\nweight: 1\n", "epochs 3.0: must be a whole number"),
    ("image: x\nepochs: 3\ndue: 2027-01-16\nweight: 1\n", "a date alone"),
    ("image: x\nepochs: 3\ndue: +2h\nweight: 1\nenv: {LR: 0.1}\n",
     "LR=0.1: the value must be a string"),
    ("image: x\nepochs: 3\ndue: +2h\nweight: 1\ncmd: [train, 3]\n", "cmd[1] 3: must be a string"),
    ("image: x\nepochs: 3\ndue: +2h\nweight: 1\ncmd: {a: 1}\n", "list of strings"),
    ("image: X\nepochs: 3\ndue: +2h\nweight: 1\n", "image 'X': name component 'X' must be lower"),
])
def test_job_yaml_strict(tmp_path, text, why):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_job_file(path, now_s=NOW)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and why in msg and "\n" not in msg


def test_job_yaml_unreadable(tmp_path):
    with pytest.raises(InputError, match="cannot read job file"):
        load_job_file(tmp_path / "missing.yaml", now_s=NOW)
    bad = tmp_path / "bin.yaml"
    bad.write_bytes(b"image: \xff\n")
    with pytest.raises(InputError, match="not UTF-8"):
        load_job_file(bad, now_s=NOW)


@pytest.mark.parametrize("share, milli", [("0.25", 250), ("25%", 250), (0.5, 500),
                                          (" 0.999 ", 999), ("0.1%", 1)])
def test_gpu_share_as_a_fraction_or_a_percentage(share, milli):
    spec = parse_submission(image="train:1", epochs=3, due="+1h", weight=1, gpu_share=share,
                            gpu_memory_mib="4096", now_s=NOW)
    assert spec.gpu_milli == milli and spec.gpu_memory_mib == 4096


@pytest.mark.parametrize("fields, message", [
    ({"gpu_share": "1"}, "--gpu-share '1': must be above 0 and below one whole GPU"),
    ({"gpu_share": "0"}, "--gpu-share '0': must be above 0"),
    ({"gpu_share": "nan"}, "--gpu-share 'nan': a share of one GPU"),
    ({"gpu_share": "half"}, "--gpu-share 'half': a share of one GPU"),
    ({"gpu_share": True}, "--gpu-share True: a share of one GPU"),
    ({"gpu_share": "0.5", "max_gpus": "2"}, "--max-gpus '2': a job with a GPU share runs on one"),
    ({"gpu_memory_mib": "0"}, "--gpu-memory-mib '0': must be >= 1"),
    ({"gpu_memory_mib": str(1 << 21)}, "--gpu-memory-mib '2097152': must be <= 1048576"),
])
def test_bad_gpu_share_names_the_field(fields, message):
    with pytest.raises(InputError) as e:
        parse_submission(image="train:1", epochs=3, due="+1h", weight=1, now_s=NOW, **fields)
    assert str(e.value).startswith(message), str(e.value)
