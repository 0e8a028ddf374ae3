"""The real Slurm cluster of the tests (scripts/slurm-test-cluster.sh), once per session.

``scripts/test.sh`` starts it and exports ``ANDREAS_TEST_SLURM_DIR`` (and SLURM_CONF); a
session without them (``pytest tests/executor`` by hand) starts a private one here with
the same script and stops it at the end. Either way the Slurm tests run, never skip; they
fail when the Debian packages cannot be installed. Marker ``slurm``: every test that uses
the ``slurm_cluster`` fixture.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class SlurmCluster:
    run_dir: Path
    nodes: tuple[str, ...]
    partition: str
    slurm_conf: str

    @property
    def env(self) -> dict[str, str]:
        """The environment Slurm's commands need (SLURM_CONF)."""
        return {**os.environ, "SLURM_CONF": self.slurm_conf}

    def node(self, action: str, name: str, timeout_s: float = 60.0) -> None:
        """``node.sh start|stop|kill NAME``: one node's slurmd (kill: a lost machine)."""
        subprocess.run([str(self.run_dir / "node.sh"), action, name], check=True,
                       timeout=timeout_s, capture_output=True)

    def scontrol(self, *args: str) -> str:
        return subprocess.run(["scontrol", *args], env=self.env, check=True, timeout=30,
                              capture_output=True, text=True).stdout

    def squeue(self, *args: str) -> str:
        return subprocess.run(["squeue", *args], env=self.env, check=True, timeout=30,
                              capture_output=True, text=True).stdout

    def wait_idle(self, name: str, timeout_s: float = 60.0) -> None:
        """Until Slurm says the node is idle (no flags): a node down is resumed, one
        powered down powered up."""
        deadline = time.monotonic() + timeout_s
        state, powered = "", False
        while time.monotonic() < deadline:
            line = self.scontrol("-o", "show", "node", name)
            state = next((w for w in line.split() if w.startswith("State=")), "")
            if state == "State=IDLE":
                return
            if "DOWN" in state and "POWER" not in state:
                self.scontrol("update", f"nodename={name}", "state=RESUME")
            elif state.endswith("+POWERED_DOWN") and not powered:
                self.scontrol("update", f"nodename={name}", "state=POWER_UP")
                powered = True
            time.sleep(0.25)
        raise AssertionError(f"node {name} not idle after {timeout_s:.0f} s ({state})")


def _from_env() -> SlurmCluster | None:
    run = os.environ.get("ANDREAS_TEST_SLURM_DIR")
    if not run or not (Path(run) / "node.sh").is_file():
        return None
    return SlurmCluster(run_dir=Path(run), nodes=tuple(os.environ["ANDREAS_TEST_SLURM_NODES"]
                                                       .split()),
                        partition=os.environ.get("ANDREAS_TEST_SLURM_PARTITION", "gpu"),
                        slurm_conf=os.environ.get("SLURM_CONF", str(Path(run) / "slurm.conf")))


class PrivateCluster:
    """A cluster started by this session: a bash that sourced the script, holding it until
    its stdin closes (its EXIT trap stops the daemons by PID)."""

    def __init__(self, base: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.env_file = base / f"env-{os.getpid()}"
        self.env_file.unlink(missing_ok=True)
        script = ('source scripts/slurm-test-cluster.sh && slurm_test_start "$1" '
                  '&& env > "$2.tmp" && mv "$2.tmp" "$2" && trap slurm_test_stop EXIT '
                  '&& read -r _')
        self.log = (base / f"start-{os.getpid()}.log").open("w")
        self.proc = subprocess.Popen(["bash", "-c", script, "_", str(base), str(self.env_file)],
                                     stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=ROOT)

    def wait(self, timeout_s: float = 300.0) -> SlurmCluster:
        deadline = time.monotonic() + timeout_s
        while not self.env_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError("the Slurm test cluster did not start: "
                                     + Path(self.log.name).read_text()[-2000:])
            time.sleep(0.2)
        env = dict(line.split("=", 1) for line in self.env_file.read_text().splitlines()
                   if "=" in line)
        return SlurmCluster(run_dir=Path(env["ANDREAS_TEST_SLURM_DIR"]),
                            nodes=tuple(env["ANDREAS_TEST_SLURM_NODES"].split()),
                            partition=env["ANDREAS_TEST_SLURM_PARTITION"],
                            slurm_conf=env["SLURM_CONF"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        self.env_file.unlink(missing_ok=True)


def session_cluster() -> tuple[SlurmCluster, PrivateCluster | None]:
    """The cluster test.sh started, else a private one (returned to be closed)."""
    given = _from_env()
    if given is not None:
        return given, None
    private = PrivateCluster(ROOT / "out" / "slurm-pytest")
    cluster = private.wait()
    os.environ["SLURM_CONF"] = cluster.slurm_conf
    return cluster, private
