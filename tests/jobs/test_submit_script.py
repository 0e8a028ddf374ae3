"""scripts/submit.sh: environment defaults, command-line options win, job files pass on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

import pytest

from andreas.store import migrate
from andreas.store.engine import make_engine

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "submit.sh"


def run(url: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JOB_")}
    environ.update(ANDREAS_DB_URL=url, ANDREAS_CONFIG="",
                   ANDREAS=str(Path(sys.executable).parent / "andreas"), **env)
    return subprocess.run(["bash", str(SCRIPT), *args], env=environ, capture_output=True,
                          text=True, timeout=120)


def test_submit_script(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    engine = make_engine(url, create_dir=True)
    migrate.upgrade(engine)

    r = run(url, "-q", "--name", "script-default", JOB_EPOCHS="5", JOB_MAX_GPUS="2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "script-default\n"
    r = run(url, "reg.io/ml/vgg19:1", "--epochs", "7", "--name", "script-override",
            JOB_EPOCHS="5", JOB_WEIGHT="0.5")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("submitted script-override: vgg19, 7 epochs")
    job_file = tmp_path / "job.yaml"
    job_file.write_text("image: x\nepochs: 3\ndue: +1h\nweight: 1\nname: script-file\n")
    r = run(url, str(job_file), "-q", JOB_EPOCHS="5")
    assert r.returncode == 0, r.stderr
    bad = run(url, "--name", "script-bad", JOB_DUE="yesterday")
    assert bad.returncode == 2 and "--due 'yesterday'" in bad.stderr

    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(sa.text(
            "SELECT id, image, epochs, weight, max_gpus FROM jobs"))}
    engine.dispose()
    assert set(rows) == {"script-default", "script-override", "script-file"}
    assert tuple(rows["script-default"])[1:] == ("andreas-example/train-numpy:latest", 5,
                                                 0.01, 2)
    assert tuple(rows["script-override"])[1:] == ("reg.io/ml/vgg19:1", 7, 0.5, None)
    assert tuple(rows["script-file"])[1:] == ("x", 3, 1.0, None)
