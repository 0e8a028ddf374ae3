"""The agent on a Slurm node (agents/slurm_jobs.py): which andreas jobs run here and on
which GPUs (a /proc tree made here, the prolog's map files), their epochs from the output
file as it grows, each once, and their end. The real thing runs in
tests/e2e/test_slurm_end_to_end.py (agents on the Slurm test cluster's nodes)."""

from __future__ import annotations

import os
from pathlib import Path

from agents.epochs import ContainerExit, ContainerInfo
from agents.records import EpochRecord
from agents.slurm_jobs import (SlurmJobRun, SlurmJobTracker, gpu_indexes, scan_map_dir,
                               scan_processes)
from andreas.job import format_progress


def _proc(root: Path, pid: int, env: dict[str, str], stdout: Path | None = None) -> None:
    d = root / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))
    if stdout is not None:
        os.symlink(stdout, d / "fd" / "1")


def test_jobs_of_this_node_from_their_processes(tmp_path: Path):
    proc = tmp_path / "proc"
    out = tmp_path / "andreas-j1-2.out"
    out.write_text("")
    job = {"SLURMD_NODENAME": "sn1", "SLURM_JOB_NAME": "andreas-j1-2", "SLURM_JOB_ID": "41",
           "SLURM_JOB_GPUS": "1,3", "CUDA_VISIBLE_DEVICES": "0,1", "PATH": "/bin"}
    _proc(proc, 100, job, stdout=out)
    _proc(proc, 101, job)
    _proc(proc, 102, {**job, "SLURMD_NODENAME": "sn2", "SLURM_JOB_ID": "42"})  # elsewhere
    _proc(proc, 103, {**job, "SLURM_JOB_NAME": "training", "SLURM_JOB_ID": "43"})  # not ours
    _proc(proc, 104, {"PATH": "/bin"})
    (proc / "self").mkdir()
    skip: set[int] = set()
    runs = scan_processes("sn1", proc, skip)
    assert runs == {"41": SlurmJobRun(slurm_id="41", name="andreas-j1-2", gpu_idx=(1, 3),
                                      output=str(out), pids=(100, 101))}
    assert skip == {102, 103, 104}
    assert scan_processes("sn1", proc, skip) == runs        # the others are not read again


def test_gpus_fall_back_to_cuda_visible_devices():
    assert gpu_indexes({"CUDA_VISIBLE_DEVICES": "2"}) == (2,)
    assert gpu_indexes({"SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0"}) == (0, 1)
    assert gpu_indexes({}) == ()


def test_jobs_from_a_prologs_map_files(tmp_path: Path):
    (tmp_path / "51").write_text("SLURM_JOB_NAME=andreas-a-1\nSLURM_JOB_GPUS=0\n"
                                 "SLURMD_NODENAME=sn1\n")
    (tmp_path / "52").write_text("SLURM_JOB_NAME=andreas-b-1\nSLURMD_NODENAME=sn2\n")
    (tmp_path / "53").write_text("SLURM_JOB_NAME=someone-else\n")
    (tmp_path / "notes.txt").write_text("SLURM_JOB_NAME=andreas-c-1\n")
    assert scan_map_dir(tmp_path, "sn1") == {
        "51": SlurmJobRun(slurm_id="51", name="andreas-a-1", gpu_idx=(0,))}
    assert scan_map_dir(tmp_path / "missing", "sn1") == {}


def test_epochs_from_the_output_file_each_once_and_the_end(tmp_path: Path):
    out = tmp_path / "andreas-j7-1.out"
    out.write_text("starting\n")
    seen: dict[str, SlurmJobRun] = {"9": SlurmJobRun(slurm_id="9", name="andreas-j7-1",
                                                     gpu_idx=(1,), output=str(out))}
    got: list[object] = []
    tracker = SlurmJobTracker(node="sn1", on_epoch=got.append, on_start=got.append,
                              on_exit=got.append, uuid_of=lambda i: f"GPU-{i}",
                              scan=lambda: dict(seen), clock=lambda: 5.0)

    def line(epoch: int, event: str, t: float) -> str:
        return format_progress("j7", epoch, 3, event, t=t) + "\n"

    tracker.poll()
    (start,) = got
    assert isinstance(start, ContainerInfo) and start.gpu_uuids == ("GPU-1",)
    assert (start.job_id, start.attempt, start.container_id) == ("j7", 1, "9")
    with out.open("a") as f:
        f.write(line(1, "start", 10.0) + line(1, "end", 12.0) + line(2, "start", 12.0))
        f.write(line(2, "end", 14.0)[:20])                        # half a line so far
    tracker.poll()
    with out.open("a") as f:
        f.write(line(2, "end", 14.0)[20:] + line(1, "end", 12.0))  # epoch 1 again
    tracker.poll()
    epochs = [r for r in got if isinstance(r, EpochRecord)]
    assert [(r.epoch, r.start_s, r.end_s, r.gpu_uuids) for r in epochs] == [
        (1, 10.0, 12.0, ("GPU-1",)), (2, 12.0, 14.0, ("GPU-1",))]
    assert [i.container_id for i in tracker.followed()] == ["9"]
    seen["9"] = SlurmJobRun(slurm_id="9", name="andreas-j7-1", gpu_idx=(1,), output=str(out),
                            pids=(300, 301))
    tracker.poll()
    assert tracker.container_of_pid(301) == "9" and tracker.container_of_pid(5) is None
    seen.clear()
    with out.open("a") as f:
        f.write(line(3, "start", 14.0) + line(3, "end", 16.0))
    tracker.poll()                                  # missing once: maybe a slow scan
    assert not [r for r in got if isinstance(r, ContainerExit)]
    tracker.poll()
    ends = [r for r in got if isinstance(r, ContainerExit)]
    assert len(ends) == 1 and ends[0].epochs == 3 and ends[0].exit_code is None
    assert [r.epoch for r in got if isinstance(r, EpochRecord)] == [1, 2, 3]
    assert tracker.followed() == []
