"""The pure parts of the Docker executor: container options, binds, Docker times."""

from __future__ import annotations

from datetime import UTC, datetime

import docker.types
import pytest

from andreas.config import ExecutorSettings
from andreas.executor.base import StartRequest
from andreas.jobspec import image_allowed
from andreas.executor.docker import container_state, docker_time
from andreas.executor.run_options import run_options
from andreas.executor.errors import ExecutorError
from andreas.job import container_labels

SETTINGS = ExecutorSettings(checkpoint_root="/srv/ckpt/", checkpoint_mount="/ckpt",
                            network="jobs", extra_volumes=("/opt/rt:/rt:ro", "/data:/data"))


def request(**fields) -> StartRequest:
    values = dict(job_id="j1", attempt=3, image="reg.example/train:1",
                  command=("python", "train.py"), env={"LR": "0.1", "ANDREAS_EPOCHS": "999"},
                  epochs=20, gpu_uuids=("GPU-aaa", "GPU-bbb"), restart_count=2)
    values.update(fields)
    return StartRequest(**values)


def test_real_gpus_get_one_device_request_with_their_uuids():
    opts = run_options(request(), SETTINGS)
    (req,) = opts["device_requests"]
    assert isinstance(req, docker.types.DeviceRequest)
    assert req["DeviceIDs"] == ["GPU-aaa", "GPU-bbb"]
    assert req["Capabilities"] == [["gpu"]]
    assert req["Count"] == 0            # the ids choose the GPUs, not a count


def test_fake_gpus_and_no_gpus_get_no_device_request():
    assert "device_requests" not in run_options(request(fake_gpus=True), SETTINGS)
    assert "device_requests" not in run_options(request(gpu_uuids=()), SETTINGS)


def test_options_follow_the_job_contract_and_the_settings():
    opts = run_options(request(), SETTINGS)
    assert opts["name"] == "andreas-j1-3" and opts["image"] == "reg.example/train:1"
    assert opts["detach"] is True and opts["command"] == ["python", "train.py"]
    assert opts["labels"] == container_labels("j1", 3, ("GPU-aaa", "GPU-bbb"), grace_s=120.0)
    assert opts["labels"]["andreas.grace_s"] == "120"      # the agent's fence kills after it
    # the job's own variables, and the contract's (which win over a job's copy)
    assert opts["environment"] == {"LR": "0.1", "ANDREAS_JOB_ID": "j1",
                                   "ANDREAS_CHECKPOINT_DIR": "/ckpt", "ANDREAS_EPOCHS": "20",
                                   "ANDREAS_RESTART_COUNT": "2"}
    assert opts["volumes"] == ["/srv/ckpt/j1:/ckpt:rw", "/opt/rt:/rt:ro", "/data:/data:rw"]
    assert opts["network_mode"] == "jobs"
    assert opts["privileged"] is False and opts["auto_remove"] is False
    assert opts["security_opt"] == ["no-new-privileges"]
    # the security profile (issue 16): no capabilities, a non-root user, a process limit
    assert opts["cap_drop"] == ["ALL"] and "cap_add" not in opts
    assert opts["user"] == "65534:65534" and opts["pids_limit"] == 4096
    assert "mem_limit" not in opts                      # the node's memory is unknown here
    assert opts["oom_score_adj"] == 500                 # the job dies before the agent
    assert "restart_policy" not in opts     # one container per attempt


def test_limits_and_the_user_come_from_the_settings():
    opts = run_options(request(), ExecutorSettings(user="1000:1000", memory_limit_mib=2048,
                                                   pids_limit=0))
    assert opts["user"] == "1000:1000" and opts["pids_limit"] == -1
    assert opts["mem_limit"] == opts["memswap_limit"] == "2048m"
    with pytest.raises(ExecutorError, match="uid or gid 0 is root"):
        run_options(request(), ExecutorSettings(user="0:0"))


def test_a_job_gets_the_nodes_memory_less_the_reserve_by_default():
    """Issue 32: jobs had no memory limit by default; one could starve the node's agent."""
    opts = run_options(request(), ExecutorSettings(), node_memory_mib=65536)
    assert opts["mem_limit"] == opts["memswap_limit"] == f"{65536 - 2048}m"
    small = run_options(request(), ExecutorSettings(), node_memory_mib=1024)
    assert small["mem_limit"] == "256m"
    assert "mem_limit" not in run_options(request(), ExecutorSettings(memory_limit_mib=0),
                                          node_memory_mib=65536)     # 0: none, on purpose
    assert run_options(request(), ExecutorSettings(memory_limit_mib=4096),
                       node_memory_mib=65536)["mem_limit"] == "4096m"


def test_a_star_never_crosses_a_slash_in_the_allow_list():
    assert image_allowed("reg.io/ml/train:1", ("reg.io/ml/*",))
    assert not image_allowed("reg.io/ml/team/train:1", ("reg.io/ml/*",))
    assert image_allowed("train:1", ("train:*",))
    assert not image_allowed("train:5000/evil/x:1", ("train:*",))      # another registry
    assert not image_allowed("reg.io.evil.com/ml/x", ("reg.io/*",))


def test_the_checkpoint_directory_is_made_writable_for_the_containers_user(tmp_path):
    from andreas.executor.run_options import prepare_checkpoint_dir

    settings = ExecutorSettings(checkpoint_root=str(tmp_path), user="65534:65534")
    path = prepare_checkpoint_dir("j1", settings)
    assert path == tmp_path / "j1" and path.is_dir()
    st = path.stat()
    assert (st.st_uid, st.st_gid) == (65534, 65534) or st.st_mode & 0o777 == 0o777
    assert prepare_checkpoint_dir("j1", ExecutorSettings(
        checkpoint_root=str(tmp_path / "not-here"))) is None


def test_no_command_keeps_the_image_default():
    assert "command" not in run_options(request(command=()), SETTINGS)


def test_bad_settings_and_requests_are_one_line_executor_errors():
    with pytest.raises(ExecutorError, match="extra_volumes '/a:/b:rx'"):
        run_options(request(), ExecutorSettings(extra_volumes=("/a:/b:rx",)))
    with pytest.raises(ExecutorError, match="allow_host_network"):
        run_options(request(), ExecutorSettings(network="host"))
    assert run_options(request(), ExecutorSettings(network="host", allow_host_network=True)
                       )["network_mode"] == "host"
    with pytest.raises(ExecutorError, match="job 'bad id'"):
        run_options(request(job_id="bad id"), SETTINGS)


def test_allowlist_is_fnmatch_and_empty_allows_everything():
    assert image_allowed("anything:1", ())
    assert image_allowed("reg.example/ml/train:2", ("reg.example/ml/*",))
    assert not image_allowed("evil.example/ml/train:2", ("reg.example/ml/*",))
    assert not image_allowed("REG.example/ml/x", ("reg.example/ml/*",))   # case-sensitive


def test_docker_times_are_utc_seconds_and_the_zero_time_is_none():
    assert docker_time("0001-01-01T00:00:00Z") is None
    assert docker_time("") is None and docker_time(None) is None
    t = docker_time("2024-05-01T12:34:56.123456789Z")
    assert t == pytest.approx(datetime(2024, 5, 1, 12, 34, 56, tzinfo=UTC).timestamp()
                              + 0.123456789, abs=1e-6)
    assert docker_time("2024-05-01T14:34:56+02:00") == pytest.approx(t - 0.123456789)


def _info(status: str, **state) -> dict:
    return {"Id": "abc", "Name": "/andreas-j1-2",
            "Config": {"Labels": container_labels("j1", 2, ("GPU-x",))},
            "State": {"Status": status, "Running": status == "running", "ExitCode": 0,
                      "OOMKilled": False, "Error": "", "StartedAt": "0001-01-01T00:00:00Z",
                      "FinishedAt": "0001-01-01T00:00:00Z", **state}}


def test_container_state_from_inspect():
    run = container_state(_info("running", StartedAt="2024-05-01T12:00:00Z"))
    assert run.running and run.exit_code is None and run.finished_s is None
    assert (run.job_id, run.attempt, run.gpu_uuids, run.name) == ("j1", 2, ("GPU-x",),
                                                                  "andreas-j1-2")
    done = container_state(_info("exited", ExitCode=137, OOMKilled=True,
                                 StartedAt="2024-05-01T12:00:00Z",
                                 FinishedAt="2024-05-01T12:01:00.5Z"))
    assert not done.running and done.exit_code == 137 and done.oom_killed
    assert done.finished_s - done.started_s == pytest.approx(60.5)
    # created but never started: no exit code, no times (the manager removes it)
    never = container_state(_info("created"))
    assert not never.running and never.exit_code is None
    assert never.started_s is None and never.finished_s is None
    assert container_state({"Id": "x", "Config": {"Labels": {}}, "State": {}}) is None


def test_a_gpu_share_caps_compute_through_cuda_mps():
    opts = run_options(request(gpu_uuids=("GPU-aaa",), gpu_milli=333), SETTINGS)
    env = opts["environment"]
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "34"      # rounded up, never 0
    assert env["ANDREAS_GPU_SHARE"] == "0.333"
    assert "CUDA_MPS_PIPE_DIRECTORY" not in env                  # no MPS daemon configured
    assert opts["device_requests"][0]["DeviceIDs"] == ["GPU-aaa"]
    mps = ExecutorSettings(checkpoint_root="/srv/ckpt", mps_pipe_dir="/run/nvidia-mps")
    opts = run_options(request(gpu_uuids=("GPU-aaa",), gpu_milli=5), mps)
    assert opts["environment"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "1"
    assert opts["environment"]["CUDA_MPS_PIPE_DIRECTORY"] == "/tmp/nvidia-mps"
    assert "/run/nvidia-mps:/tmp/nvidia-mps:rw" in opts["volumes"]
    whole = run_options(request(), mps)
    assert not any(k.startswith("CUDA_MPS") for k in whole["environment"])
    assert "/run/nvidia-mps:/tmp/nvidia-mps:rw" not in whole["volumes"]


def test_a_share_is_labelled_and_read_back():
    from andreas.job import job_labels
    opts = run_options(request(gpu_uuids=("GPU-aaa",), gpu_milli=250), SETTINGS)
    assert job_labels(opts["labels"]).gpu_milli == 250
    assert job_labels(run_options(request(), SETTINGS)["labels"]).gpu_milli is None
    bad = dict(opts["labels"], **{"andreas.gpu_milli": "1000"})
    with pytest.raises(ValueError, match="andreas.gpu_milli"):
        job_labels(bad)
