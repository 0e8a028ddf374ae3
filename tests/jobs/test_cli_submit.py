"""`andreas submit` on SQLite and MariaDB: what is stored, and that every bad field is one
error line with exit code 2 and nothing stored."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from andreas.store.models import Job, JobState
from andreas.service.submit import parse_submission, submit
from andreas.errors import InputError
from tests.jobs.conftest import NOW, job_count, run_cli
from tests.store.helpers import unique

GOOD = ("--epochs", "30", "--due", "+12h", "--weight", "0.01")


def stored(store, job_id: str) -> Job:
    with store.session() as s:
        return s.execute(sa.select(Job).where(Job.id == job_id)).scalar_one()


def test_submit_stores_queued_job(db_url, store):
    name = unique("sub")
    r = run_cli(db_url, "submit", "reg.io/ml/resnet50:2", *GOOD, "--cmd",
                "python train.py --msg 'a b'", "--env", "LR=0.1", "--env", "SEED=7",
                "--max-gpus", "2", "--grace-s", "45", "--name", name)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"submitted {name}: resnet50, 30 epochs, due "
                               "2027-01-15 20:00Z (in 12h), weight 0.01/s")
    job = stored(store, name)
    assert job.state is JobState.QUEUED
    assert (job.submit_s, job.due_s, job.state_changed_s) == (NOW, NOW + 12 * 3600, NOW)
    assert (job.image, job.application, job.epochs, job.epochs_done) == (
        "reg.io/ml/resnet50:2", "resnet50", 30, 0)
    assert job.weight == 0.01 and job.max_gpus == 2 and job.grace_s == 45.0
    assert job.command == ["python", "train.py", "--msg", "a b"]
    assert job.env == {"LR": "0.1", "SEED": "7"}
    assert job.failures == 0 and job.reason is None


def test_submit_a_gpu_share(db_url, store):
    name = unique("share")
    r = run_cli(db_url, "submit", "reg.io/ml/bert:1", *GOOD, "--gpu-share", "30%",
                "--gpu-memory-mib", "6000", "--name", name)
    assert r.exit_code == 0, r.output
    assert "30% of one GPU" in r.stdout
    job = stored(store, name)
    assert (job.gpu_milli, job.gpu_memory_mib, job.max_gpus) == (300, 6000, None)
    shown = run_cli(db_url, "show", name)
    assert shown.exit_code == 0, shown.output
    assert "30% of one GPU, 6000 MiB GPU memory" in shown.stdout


def test_quiet_prints_only_the_generated_id(db_url, store):
    r = run_cli(db_url, "submit", "andreas-example/train-numpy:latest", *GOOD, "-q")
    assert r.exit_code == 0, r.output
    job_id = r.stdout.strip()
    assert job_id.startswith("20270115-080000-") and len(job_id) == len("20270115-080000-") + 6
    job = stored(store, job_id)
    assert job.application == "train-numpy" and job.command == [] and job.env == {}
    assert job.grace_s == 120.0 and job.max_gpus is None      # [executor] stop_grace_s


def test_default_grace_comes_from_the_config(db_url, store, tmp_path):
    config = tmp_path / "andreas.toml"
    config.write_text("[executor]\nstop_grace_s = 33\n")
    r = run_cli(db_url, "submit", "x", *GOOD, "-q", env={"ANDREAS_CONFIG": str(config)})
    assert r.exit_code == 0, r.output
    assert stored(store, r.stdout.strip()).grace_s == 33.0


def test_image_allowlist_refuses_early(db_url, store, tmp_path):
    config = tmp_path / "andreas.toml"
    config.write_text('[executor]\nimage_allowlist = ["registry.example.org/ml/*"]\n')
    before = job_count(store)
    r = run_cli(db_url, "submit", "evil.io/miner:1", *GOOD, env={"ANDREAS_CONFIG": str(config)})
    assert r.exit_code == 2
    assert "IMAGE 'evil.io/miner:1': not allowed" in r.stderr
    assert job_count(store) == before
    ok = run_cli(db_url, "submit", "registry.example.org/ml/a:1", *GOOD,
                 env={"ANDREAS_CONFIG": str(config)})
    assert ok.exit_code == 0, ok.output


BAD = [
    (("Bad/Image", *GOOD), "IMAGE 'Bad/Image'"),
    (("x", "--epochs", "0", "--due", "+1h", "--weight", "1"), "--epochs '0'"),
    (("x", "--epochs", "ten", "--due", "+1h", "--weight", "1"), "--epochs 'ten'"),
    (("x", "--epochs", "3", "--due", "+0s", "--weight", "1"), "--due '+0s'"),
    (("x", "--epochs", "3", "--due", "2020-01-01T00:00Z", "--weight", "1"),
     "--due '2020-01-01T00:00Z'"),
    (("x", "--epochs", "3", "--due", "soon", "--weight", "1"), "--due 'soon'"),
    (("x", "--epochs", "3", "--due", "+1h", "--weight", "-0.5"), "--weight '-0.5'"),
    (("x", "--epochs", "3", "--due", "+1h", "--weight", "nan"), "--weight 'nan'"),
    (("x", *GOOD, "--app", "a b"), "--app 'a b'"),
    (("x", *GOOD, "--cmd", "a 'b"), "--cmd \"a 'b\""),
    (("x", *GOOD, "--env", "ANDREAS_EPOCHS=3"), "--env 'ANDREAS_EPOCHS'"),
    (("x", *GOOD, "--env", "X"), "--env 'X'"),
    (("x", *GOOD, "--max-gpus", "0"), "--max-gpus '0'"),
    (("x", *GOOD, "--grace-s", "0"), "--grace-s '0'"),
    (("x", *GOOD, "--name", "bad/name"), "--name 'bad/name'"),
    (("x", *GOOD, "--gpu-share", "1.5"), "--gpu-share '1.5'"),
    (("x", *GOOD, "--gpu-share", "0.5", "--max-gpus", "4"), "--max-gpus '4'"),
    (("x", *GOOD, "--gpu-memory-mib", "-1"), "--gpu-memory-mib '-1'"),
    (("x", "--due", "+1h", "--weight", "1"), "--epochs is required"),
    (("x", "--epochs", "3", "--weight", "1"), "--due is required"),
    (("x", "--epochs", "3", "--due", "+1h"), "--weight is required"),
]


@pytest.mark.parametrize("args, names", BAD, ids=[b[1] for b in BAD])
def test_bad_field_exit_2_one_line_nothing_stored(db_url, store, args, names):
    before = job_count(store)
    r = run_cli(db_url, "submit", *args)
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("andreas: error: ") and names in lines[0]
    assert r.stdout == ""
    assert job_count(store) == before


def test_duplicate_id_is_refused_ignoring_case(db_url, store):
    name = unique("Dup")
    assert run_cli(db_url, "submit", "x", *GOOD, "--name", name).exit_code == 0
    before = job_count(store)
    for again in (name, name.lower()):
        r = run_cli(db_url, "submit", "y", *GOOD, "--name", again)
        assert r.exit_code == 2
        assert f"job id {again!r}: a job with this id exists already" in r.stderr
    assert job_count(store) == before
    assert stored(store, name).image == "x"          # the first one is untouched


def test_submit_library_refuses_duplicates(store):
    spec = parse_submission(image="x", epochs=1, due="+1h", weight=1, name=unique("lib"),
                            now_s=NOW)
    assert submit(store, spec, NOW) == spec.id
    with pytest.raises(InputError, match="exists already"):
        submit(store, spec, NOW + 1)


def test_job_file(db_url, store, tmp_path):
    name = unique("file")
    path = tmp_path / "job.yaml"
    path.write_text(f"image: reg.io/ml/vgg19:1\nepochs: 5\ndue: +2d\nweight: 0.003\n"
                    f"env:\n  LR: '0.1'\nmax_gpus: 4\nname: {name}\n")
    r = run_cli(db_url, "submit", str(path), "--quiet")
    assert r.exit_code == 0, r.output
    assert r.stdout == f"{name}\n"
    job = stored(store, name)
    assert (job.application, job.epochs, job.due_s, job.weight, job.max_gpus, job.env) == (
        "vgg19", 5, NOW + 2 * 86400, 0.003, 4, {"LR": "0.1"})


FILE_BAD = [
    ("image: x\nepochs: 5\ndue: +2d\nweight: 1\nepoch: 3\n", "unknown key 'epoch'"),
    ("image: x\nepochs: 0\ndue: +2d\nweight: 1\n", "epochs 0: must be >= 1"),
    ("image: x\nepochs: 5\ndue: +2d\nweight: 1\nweight: 2\n", "'weight' appears twice"),
]


@pytest.mark.parametrize("text, why", FILE_BAD, ids=[w for _, w in FILE_BAD])
def test_job_file_errors_exit_2_nothing_stored(db_url, store, tmp_path, text, why):
    path = tmp_path / "job.yml"
    path.write_text(text)
    before = job_count(store)
    r = run_cli(db_url, "submit", str(path))
    assert r.exit_code == 2 and why in r.stderr and str(path) in r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert job_count(store) == before


def test_job_file_and_options_are_exclusive(db_url, store, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("image: x\nepochs: 5\ndue: +2d\nweight: 1\n")
    before = job_count(store)
    r = run_cli(db_url, "submit", str(path), "--epochs", "3", "--env", "A=1")
    assert r.exit_code == 2
    assert "either a job file or options, not both (remove --epochs, --env)" in r.stderr
    missing = run_cli(db_url, "submit", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2 and "job file not found" in missing.stderr
    assert job_count(store) == before


def test_submit_help_explains():
    r = run_cli("sqlite:///unused.db", "submit", "--help")
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    for words in ("+12h", "ISO 8601", "second the job finishes after its due date",
                  "job.yaml", "ANDREAS_*", "Nothing is stored when any field is wrong"):
        assert words in text
