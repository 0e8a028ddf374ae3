"""scripts/apt-install.sh and its callers: the install path that only a fresh machine
takes, run here against a fake apt-get (and a fake id for an unprivileged user)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.paths import ROOT

FAKE_APT = """#!/bin/sh
echo "$DEBIAN_FRONTEND $*" >> "$APT_LOG"
"""


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, str]:
    """PATH with a logging apt-get in front; APT_LOG its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    apt = bin_dir / "apt-get"
    apt.write_text(FAKE_APT)
    apt.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "APT_LOG": str(tmp_path / "apt.log"), "ANDREAS_APT_UPDATED": ""}


def bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=60)


def calls(env: dict[str, str]) -> list[str]:
    log = Path(env["APT_LOG"])
    return log.read_text().splitlines() if log.exists() else []


def as_user(env: dict[str, str]) -> dict[str, str]:
    """The same PATH with an ``id`` that answers 1000: not root."""
    fake_id = Path(env["PATH"].split(":")[0]) / "id"
    fake_id.write_text("#!/bin/sh\necho 1000\n")
    fake_id.chmod(0o755)
    return env


def test_root_installs_and_updates_once(fake: dict[str, str]) -> None:
    done = bash("source scripts/apt-install.sh; andreas_apt_install me 'a tool' p1 p2 && "
                "andreas_apt_install --recommends me 'another' p3", fake)
    assert done.returncode == 0, done.stderr
    assert calls(fake) == [
        "noninteractive update -qq",
        "noninteractive install -y -qq --no-install-recommends p1 p2",
        "noninteractive install -y -qq p3"]
    assert "== installing p1 p2 (apt-get)" in done.stdout


def test_unprivileged_gets_one_line_and_no_apt(fake: dict[str, str]) -> None:
    done = bash("source scripts/apt-install.sh; andreas_apt_install me 'a tool' p1 p2",
                as_user(fake))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "me: a tool is missing; install the Debian package(s) p1 p2 (apt-get install p1 p2) "
        "and run again"]
    assert calls(fake) == []


@pytest.mark.parametrize(("script", "stub", "install", "packages"), [
    ("mariadb-test-server", "_mariadb_bin", "mariadb_test_install",
     "install -y -qq mariadb-server"),
    ("prometheus-test-server", "_prometheus_bin", "prometheus_test_install",
     "install -y -qq --no-install-recommends prometheus"),
    ("slurm-test-cluster", "_slurm_bin", "slurm_test_install",
     "install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge"),
    ("docker-test-daemon", "_docker_bin", "docker_test_install",
     "install -y -qq --no-install-recommends docker.io"),
])
def test_each_service_script_installs_its_packages(fake: dict[str, str], script: str,
                                                   stub: str, install: str,
                                                   packages: str) -> None:
    """With its programs missing (the lookup stubbed out), each script asks for its own
    Debian packages through the one helper."""
    done = bash(f"source scripts/{script}.sh; {stub}() {{ return 1; }}; {install}", fake)
    assert done.returncode == 0, done.stderr
    assert calls(fake)[0] == "noninteractive update -qq"
    assert f"noninteractive {packages}" in calls(fake)[1:]
