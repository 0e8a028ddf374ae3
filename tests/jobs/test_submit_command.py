"""Jobs without an image (``andreas submit --cmd ... --app ...``): the Slurm executor runs
them as plain commands; under Docker they are refused at submission, one line, exit 2,
nothing stored (and an image is refused on Slurm)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from andreas.store.models import Job
from tests.jobs.conftest import NOW, job_count, run_cli
from tests.store.helpers import unique

GOOD = ("--epochs", "5", "--due", "+2h", "--weight", "0.01")


@pytest.fixture
def slurm_config(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "andreas.toml"
    path.write_text('[executor]\nkind = "slurm"\n[executor.slurm]\npartition = "gpu"\n'
                    f'output_dir = "{tmp_path}"\n')
    return {"ANDREAS_CONFIG": str(path)}


def stored(store, job_id: str) -> Job:
    with store.session() as s:
        return s.execute(sa.select(Job).where(Job.id == job_id)).scalar_one()


def test_a_command_job_on_slurm(db_url, store, slurm_config):
    name = unique("cmd")
    r = run_cli(db_url, "submit", "--cmd", "python3 train.py --lr 0.1", "--app", "example",
                *GOOD, "--name", name, env=slurm_config)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"submitted {name}: example, 5 epochs")
    job = stored(store, name)
    assert (job.image, job.command, job.application) == (
        "", ["python3", "train.py", "--lr", "0.1"], "example")
    assert (job.due_s, job.weight, job.epochs) == (NOW + 7200, 0.01, 5)
    shown = run_cli(db_url, "show", name, env=slurm_config)
    assert shown.exit_code == 0 and "python3 train.py --lr 0.1" in shown.stdout, shown.output


def test_a_command_job_file_on_slurm(db_url, store, slurm_config, tmp_path: Path):
    name = unique("cmdfile")
    f = tmp_path / "job.yaml"
    f.write_text(f"name: {name}\ncmd: [python3, train.py]\napp: example\nepochs: 3\n"
                 "due: +1h\nweight: 0.5\n")
    r = run_cli(db_url, "submit", str(f), env=slurm_config)
    assert r.exit_code == 0, r.output
    assert (stored(store, name).image, stored(store, name).command) == (
        "", ["python3", "train.py"])


@pytest.mark.parametrize("args,message", [
    (("--cmd", "python3 train.py", "--app", "example"),
     "--cmd without IMAGE: the Docker executor ([executor] kind = \"docker\") runs images"),
    ((), "IMAGE or JOB.yaml is required (or --cmd for a job without an image, on Slurm)"),
])
def test_docker_refuses_a_job_without_an_image(db_url, store, args, message):
    before = job_count(store)
    r = run_cli(db_url, "submit", *args, *GOOD)
    assert r.exit_code == 2 and message in r.output and r.output.count("\n") == 1, r.output
    assert job_count(store) == before


@pytest.mark.parametrize("args,message", [
    (("reg.io/ml/train:1",), "IMAGE 'reg.io/ml/train:1': the Slurm executor ([executor] kind "
                             "= \"slurm\") runs commands, not images"),
    (("--cmd", "python3 train.py"), "--app is required for a job without an image"),
    (("--cmd", ""), "--cmd '': a job without an image needs a command to run"),
])
def test_slurm_refuses_what_it_cannot_run(db_url, store, slurm_config, args, message):
    before = job_count(store)
    extra = ("--app", "example") if args == ("--cmd", "") else ()
    r = run_cli(db_url, "submit", *args, *extra, *GOOD, env=slurm_config)
    assert r.exit_code == 2 and message in r.output and r.output.count("\n") == 1, r.output
    assert job_count(store) == before


def test_a_job_file_needs_an_image_or_a_cmd(db_url, store, slurm_config, tmp_path: Path):
    f = tmp_path / "job.yaml"
    f.write_text("app: example\nepochs: 3\ndue: +1h\nweight: 0.5\n")
    r = run_cli(db_url, "submit", str(f), env=slurm_config)
    assert r.exit_code == 2 and "image is missing (required: image or cmd" in r.output
