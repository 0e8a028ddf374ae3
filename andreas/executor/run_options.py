"""A job's container as Docker options: what one attempt runs with (image, user, limits,
binds, labels, the job contract's environment, GPUs), built from the request and the
executor's settings. Pure but for making the checkpoint directory writable."""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

from andreas.config import ExecutorSettings, check_executor, parse_extra_volume
from andreas.errors import InputError
from andreas.executor.base import StartRequest, container_name
from andreas.executor.errors import ExecutorError
from andreas.job import container_labels, job_environment

log = logging.getLogger("andreas.executor")


def volume_binds(request: StartRequest, settings: ExecutorSettings) -> list[str]:
    """The checkpoint directory (read-write) and ``extra_volumes`` (normalised, checked),
    as Docker binds."""
    root = settings.checkpoint_root.rstrip("/")
    binds = [f"{root}/{request.job_id}:{settings.checkpoint_mount}:rw"]
    for spec in settings.extra_volumes:
        binds.append(":".join(parse_extra_volume(spec, settings.checkpoint_mount,
                                                 checkpoint_root=settings.checkpoint_root)))
    return binds


# A job is the OOM killer's first choice on its node (before the agent and the engine).
JOB_OOM_SCORE_ADJ = 500
MIN_MEMORY_LIMIT_MIB = 256


def memory_limit_mib(settings: ExecutorSettings, node_memory_mib: int | None) -> int:
    """The job's memory (and memory + swap) limit; 0: none. Unset: the node's memory less
    ``memory_reserve_mib``, at least MIN_MEMORY_LIMIT_MIB (none when the node's memory is
    unknown)."""
    if settings.memory_limit_mib is not None:
        return settings.memory_limit_mib
    if not node_memory_mib or not settings.memory_reserve_mib:
        return 0
    return max(MIN_MEMORY_LIMIT_MIB, node_memory_mib - settings.memory_reserve_mib)


MPS_PIPE_MOUNT = "/tmp/nvidia-mps"
FAKE_GPU_MOUNT = "/andreas/fake-gpu"


def share_environment(gpu_milli: int, settings: ExecutorSettings) -> dict[str, str]:
    """Variables of a job that runs on a share of one GPU: its share for the job itself
    (``ANDREAS_GPU_SHARE``, 0-1) and the CUDA MPS compute cap (percent of the GPU's SMs,
    rounded up); the MPS pipe directory when the hosts run an MPS control daemon."""
    env = {"ANDREAS_GPU_SHARE": f"{gpu_milli / 1000:g}",
           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(max(1, math.ceil(gpu_milli / 10)))}
    if settings.mps_pipe_dir:
        env["CUDA_MPS_PIPE_DIRECTORY"] = MPS_PIPE_MOUNT
    return env


def prepare_checkpoint_dir(job_id: str, settings: ExecutorSettings) -> Path | None:
    """Make the job's checkpoint directory writable for the container's user, where the
    manager sees ``checkpoint_root`` (the shared directory mounted at the same path, or
    engines on the manager's host): created if missing, owned by the user's numeric
    uid:gid when the manager runs as root, else opened to everyone (0o777; the root
    directory itself should be 0o711 or tighter). Where the manager does not see the root,
    the operator creates the directories (Docker would create them owned by root, which
    a non-root job cannot write); returns None then."""
    root = Path(settings.checkpoint_root)
    if not root.is_dir():
        return None
    path = root / job_id
    try:
        path.mkdir(exist_ok=True)
        uid, _, gid = settings.user.partition(":")
        if os.geteuid() == 0 and uid.isdigit():
            os.chown(path, int(uid), int(gid) if gid.isdigit() else -1)
        else:
            os.chmod(path, 0o777)
    except OSError as e:
        log.warning("checkpoint directory %s: cannot make it writable for user %s: %s",
                    path, settings.user, e.strerror or e)
    return path


def run_options(request: StartRequest, settings: ExecutorSettings, *,
                node_memory_mib: int | None = None) -> dict[str, Any]:
    """The keyword arguments of ``client.containers.run`` for one attempt (pure);
    ``node_memory_mib``: the node's memory, for the default memory limit."""
    try:
        check_executor(settings)            # settings built in code, not from a file
        volumes = volume_binds(request, settings)
    except InputError as e:
        raise ExecutorError(str(e)) from None
    try:
        contract = job_environment(request.job_id, settings.checkpoint_mount, request.epochs,
                                   request.restart_count)
        labels = container_labels(request.job_id, request.attempt, request.gpu_uuids,
                                  request.gpu_milli, grace_s=request.grace_s,
                                  power_limit_w=request.power_limit_w)
    except ValueError as e:
        raise ExecutorError(f"job {request.job_id!r} attempt {request.attempt}: {e}") from e
    options: dict[str, Any] = {
        "image": request.image,
        "name": container_name(request.job_id, request.attempt),
        "detach": True,
        "labels": labels,
        "environment": {**request.env, **contract},     # the contract's names win
        "volumes": volumes,
        "network_mode": settings.network,
        "privileged": False,
        "auto_remove": False,                            # the log must outlive the exit
        # The security profile: no capability at all (a training job needs none: it
        # reads data, computes and writes its checkpoint directory, which is made
        # writable for its user), no new privileges, a non-root user unless configured.
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "pids_limit": settings.pids_limit or -1,
        "user": settings.user,
        "oom_score_adj": JOB_OOM_SCORE_ADJ,
    }
    memory = memory_limit_mib(settings, node_memory_mib)
    if memory:
        options["mem_limit"] = f"{memory}m"
        options["memswap_limit"] = f"{memory}m"                         # no swap on top
    if request.command:
        options["command"] = list(request.command)
    if request.gpu_milli is not None:
        options["environment"].update(share_environment(request.gpu_milli, settings))
        if settings.mps_pipe_dir:
            options["volumes"].append(f"{settings.mps_pipe_dir}:{MPS_PIPE_MOUNT}:rw")
    if request.fake_gpus and request.gpu_uuids and settings.fake_gpu_dir:
        options["volumes"].append(f"{settings.fake_gpu_dir}:{FAKE_GPU_MOUNT}:rw")
        options["environment"].update({"ANDREAS_FAKE_GPU_DIR": FAKE_GPU_MOUNT,
                                       "ANDREAS_FAKE_GPUS": ",".join(request.gpu_uuids)})
    if request.gpu_uuids and not request.fake_gpus:
        import docker.types

        options["device_requests"] = [docker.types.DeviceRequest(
            device_ids=list(request.gpu_uuids), capabilities=[["gpu"]])]
    return options
