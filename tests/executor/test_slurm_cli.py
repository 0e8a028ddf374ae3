"""The Slurm executor's pure parts: Slurm's text formats, exit codes, node states, the
batch script, and how a failing, missing or hanging command is reported (no cluster:
the command runner is a stub; tests/executor/test_slurm.py runs the real one)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from andreas.config import ExecutorSettings, SlurmSettings
from andreas.executor.base import EngineNodeState, NodeRef, StartRequest
from andreas.executor.errors import EngineUnavailable, ExecutorError, ImageNotAllowed
from andreas.executor.slurm import SlurmExecutor, wrap_script
from andreas.executor.slurm_cli import (SEP, SlurmCli, exit_status, index_list, node_state,
                                        parse_gres, parse_gres_used, parse_job_detail,
                                        parse_sinfo, parse_squeue, slurm_time)

DETAIL = ("JobId=12 JobName=andreas-j1-1 UserId=root(0) JobState=RUNNING Reason=None "
          "ExitCode=0:15 NumNodes=1 NumCPUs=1 TRES=cpu=1,node=1 JOB_GRES=gpu:v100:2   "
          "Nodes=sn2 CPU_IDs=0 Mem=0 GRES=gpu:v100:2(IDX:0-1) MinCPUsNode=1 "
          "Command=(null) WorkDir=/out StdErr=/out/andreas-j1-1.out StdIn=/dev/null "
          "StdOut=/out/andreas-j1-1.out Power=")


def test_times_are_utc_and_unknown_ones_none():
    assert slurm_time("2026-11-27T16:17:15") == 1795796235.0
    assert slurm_time("N/A") is None and slurm_time("Unknown") is None
    assert slurm_time("NONE") is None


def test_exit_code_c_s_maps_a_signal_to_128_plus_s():
    assert exit_status(0, 0) == 0 and exit_status(3, 0) == 3 and exit_status(143, 0) == 143
    assert exit_status(0, 15) == 143 and exit_status(0, 9) == 137
    assert exit_status(None, 0) is None


def test_index_lists():
    assert index_list("0-1,3") == (0, 1, 3) and index_list("N/A") == () and index_list("2") == (2,)


def test_job_detail_reads_exit_code_gpus_of_its_node_and_output():
    d = parse_job_detail(DETAIL, "sn2")
    assert (d.code, d.signal, d.gpu_idx, d.stdout) == (0, 15, (0, 1), "/out/andreas-j1-1.out")
    assert parse_job_detail(DETAIL, "sn1").gpu_idx == ()          # another node's GRES


def test_squeue_rows_keep_free_text_reasons_and_the_requested_node_of_pending_jobs():
    text = "\n".join(SEP.join(f) for f in (
        ("7", "PENDING", "sn2", "", "2026-11-27T16:24:53", "N/A", "N/A", "root",
         "andreas-j-1", "ReqNodeNotAvail, UnavailableNodes:sn2"),
        ("8", "RUNNING", "sn1", "sn1", "2026-11-27T16:24:53", "2026-11-27T16:24:54", "NONE",
         "root", "andreas-k-2", "None"),
        ("junk",)))
    pend, run = parse_squeue(text)
    assert (pend.node, pend.ran, pend.reason) == ("sn2", False,
                                                 "ReqNodeNotAvail, UnavailableNodes:sn2")
    assert (run.node, run.ran, run.start_s, run.end_s) == ("sn1", True, 1795796694.0, None)


@pytest.mark.parametrize("raw,state", [
    ("idle", EngineNodeState.UP), ("mixed", EngineNodeState.UP),
    ("allocated+not_responding", EngineNodeState.UP),          # Slurm has not given up yet
    ("down+not_responding", EngineNodeState.DOWN), ("idle+drain", EngineNodeState.DRAINING),
    ("drained", EngineNodeState.DRAINING), ("idle+powered_down", EngineNodeState.POWERED_DOWN),
    ("idle+powering_down", EngineNodeState.POWERING_DOWN),
    ("idle+power_up+powered_down", EngineNodeState.POWERING_UP),
    ("down+powered_down+not_responding", EngineNodeState.DOWN),
    ("unknown+not_responding", EngineNodeState.DOWN), ("", EngineNodeState.DOWN)])
def test_node_states(raw: str, state: EngineNodeState):
    assert node_state(raw) is state


def test_gres_type_count_and_used_indexes():
    assert parse_gres("gpu:v100:2(S:0-1)") == ("v100", 2)
    assert parse_gres("gpu:4,mps:100") == ("", 4)
    assert parse_gres("(null)") == ("", 0)
    assert parse_gres_used("gpu:v100:1(IDX:0),mps:0(IDX:N/A)") == (0,)
    rows = parse_sinfo("sn1|idle+drain|gpu:v100:2|gpu:v100:0(IDX:N/A)|maint | today\n")
    assert (rows[0].state, rows[0].gpus, rows[0].reason) == (EngineNodeState.DRAINING, 2,
                                                             "maint | today")


def test_the_batch_script_waits_for_the_command_and_its_process_group(tmp_path: Path):
    script = wrap_script(("sh", "-c", "sleep 0.3 & echo started; exit 7"))
    assert script.startswith("sh -c 'sleep 0.3 & echo started; exit 7' &")
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10)
    assert done.returncode == 7 and done.stdout == "started\n"


# ------------------------------------------------------------------ failing commands

def _cli(tmp_path: Path, script: str | None, timeout_s: float = 2.0) -> SlurmCli:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("sbatch", "squeue", "sinfo", "scontrol", "scancel"):
        if script is not None:
            (bin_dir / name).write_text(f"#!/bin/sh\n{script}\n")
            (bin_dir / name).chmod(0o755)
    return SlurmCli(SlurmSettings(partition="gpu", output_dir=str(tmp_path),
                                  bin_dir=str(bin_dir), command_timeout_s=timeout_s))


def test_a_missing_command_is_the_engine_unavailable_in_one_line(tmp_path: Path):
    with pytest.raises(EngineUnavailable, match=r"cannot run .*/squeue.*bin_dir\)$"):
        _cli(tmp_path, None).run("squeue", [], what="list jobs")


def test_a_hanging_command_is_killed_after_the_timeout(tmp_path: Path):
    with pytest.raises(EngineUnavailable, match="did not answer within 0.5 s"):
        _cli(tmp_path, "sleep 30", timeout_s=0.5).run("squeue", [], what="list jobs")


def test_a_controller_that_does_not_answer_is_the_engine_unavailable(tmp_path: Path):
    cli = _cli(tmp_path, 'echo "squeue: error: Unable to contact slurm controller '
                         '(connect failure)" >&2; exit 1')
    with pytest.raises(EngineUnavailable, match="Unable to contact slurm controller"):
        cli.run("squeue", [], what="list jobs")


def test_any_other_failure_is_one_line_with_slurms_message(tmp_path: Path):
    cli = _cli(tmp_path, 'echo "sbatch: error: Batch job submission failed:" >&2; '
                         'echo "Invalid partition name specified" >&2; exit 1')
    with pytest.raises(ExecutorError) as e:
        cli.run("sbatch", [], what="submit")
    assert not isinstance(e.value, EngineUnavailable)
    assert str(e.value) == ("Slurm: sbatch (submit): sbatch: error: Batch job submission "
                            "failed: | Invalid partition name specified")


def test_commands_get_no_secret_of_the_managers_environment(tmp_path: Path):
    cli = SlurmCli(SlurmSettings(partition="gpu", output_dir=str(tmp_path)),
                   environ={"PATH": "/usr/bin", "ANDREAS_DB_URL": "mysql://u:secret@h/db",
                            "SLURM_CONF": "/etc/slurm/slurm.conf", "AWS_SECRET": "x"})
    assert cli.base_env() == {"PATH": "/usr/bin", "SLURM_CONF": "/etc/slurm/slurm.conf",
                              "TZ": "UTC"}


def _executor(tmp_path: Path, script: str) -> SlurmExecutor:
    settings = ExecutorSettings(checkpoint_root=str(tmp_path), kind="slurm",
                                slurm=SlurmSettings(partition="gpu", output_dir=str(tmp_path)))
    return SlurmExecutor(settings, cli=_cli(tmp_path, script), user="andreas")


def test_start_refuses_images_and_jobs_without_a_command(tmp_path: Path):
    ex = _executor(tmp_path, "exit 0")
    node = NodeRef(name="sn1", docker_endpoint="")
    req = StartRequest(job_id="j", attempt=1, image="reg/x:1", epochs=1, gpu_uuids=("G",))
    with pytest.raises(ImageNotAllowed, match="runs commands, not images"):
        ex.start(node, req)
    with pytest.raises(ImageNotAllowed, match="no command"):
        ex.start(node, StartRequest(job_id="j", attempt=1, image="", epochs=1,
                                    gpu_uuids=("G",)))


def test_sbatch_arguments_and_environment(tmp_path: Path):
    settings = ExecutorSettings(
        checkpoint_root=str(tmp_path), kind="slurm",
        slurm=SlurmSettings(partition="gpu", output_dir=str(tmp_path), account="ml",
                            sbatch_args=("--cpus-per-task=4",)))
    ex = SlurmExecutor(settings, cli=_cli(tmp_path, "exit 0"), user="andreas")
    node = NodeRef(name="sn2", docker_endpoint="")
    argv, env = ex.sbatch(node, StartRequest(job_id="j1", attempt=3, image="", epochs=7,
                                             command=("python3", "t.py"), env={"LR": "0.1"},
                                             gpu_uuids=("a", "b"), restart_count=2))
    assert argv[:9] == ["--parsable", "--job-name=andreas-j1-3", "--nodelist=sn2",
                        "--partition=gpu", f"--output={tmp_path}/andreas-j1-3.out",
                        "--open-mode=append", f"--chdir={tmp_path}", "--no-requeue",
                        "--export=ALL"]
    assert "--gres=gpu:2" in argv and "--account=ml" in argv and "--cpus-per-task=4" in argv
    assert argv[-1].startswith("--wrap=python3 t.py & ")
    assert not any(a.startswith("--deadline") for a in argv)
    assert env["ANDREAS_JOB_ID"] == "j1" and env["ANDREAS_EPOCHS"] == "7"
    assert env["ANDREAS_RESTART_COUNT"] == "2" and env["LR"] == "0.1"
    assert env["ANDREAS_CHECKPOINT_DIR"] == str(tmp_path / "j1")
    assert (tmp_path / "j1").is_dir()


def test_an_output_dir_the_manager_cannot_see_is_refused(tmp_path: Path):
    settings = ExecutorSettings(kind="slurm", slurm=SlurmSettings(
        partition="gpu", output_dir=str(tmp_path / "nowhere")))
    with pytest.raises(ExecutorError, match="output_dir .*nowhere: not a directory"):
        SlurmExecutor(settings)
