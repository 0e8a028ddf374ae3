"""The contract's names: environment variables, container labels, exit codes, job ids."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENV_JOB_ID = "ANDREAS_JOB_ID"
ENV_CHECKPOINT_DIR = "ANDREAS_CHECKPOINT_DIR"
ENV_EPOCHS = "ANDREAS_EPOCHS"
ENV_RESTART_COUNT = "ANDREAS_RESTART_COUNT"

LABEL_JOB = "andreas.job"
LABEL_ATTEMPT = "andreas.attempt"
LABEL_GPUS = "andreas.gpus"
LABEL_GPU_MILLI = "andreas.gpu_milli"     # a share of its one GPU (absent: whole GPUs)
LABEL_GRACE = "andreas.grace_s"           # SIGTERM -> SIGKILL, for the node agent's fence
# The GPUs' power limit of a run no attempt row plans (`andreas profile`'s level runs);
# the manager's attempts carry theirs in the store, where a plan may change it.
LABEL_POWER_LIMIT = "andreas.power_limit_w"
MAX_POWER_LIMIT_W = 10_000.0

EXIT_DONE = 0
EXIT_PREEMPTED = 143      # 128 + SIGTERM: stopped on request, resumable
EXIT_KILLED = 137         # 128 + SIGKILL: resume from the manifest if there is one

DEFAULT_LOCAL_JOB_ID = "local"

_JOB_ID = re.compile(r"[A-Za-z0-9._\-:@+]{1,64}")
WHOLE_NUMBER = re.compile(r"[0-9]{1,12}")     # attempts, epochs: digits only, bounded


def valid_job_id(job_id: object) -> bool:
    return isinstance(job_id, str) and _JOB_ID.fullmatch(job_id) is not None


def positive_int(value: object, what: str) -> int:
    """``value`` if it is an int >= 1 (not a bool); else ValueError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"progress line: {what} must be a whole number >= 1, got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class JobEnv:
    """The contract's environment as a training process sees it (None where unset)."""

    job_id: str | None
    checkpoint_dir: Path | None
    epochs: int | None
    restart_count: int = 0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> JobEnv:
        """Read the variables; a malformed one raises ValueError naming it and its value."""
        env = os.environ if environ is None else environ
        job_id = env.get(ENV_JOB_ID) or None
        if job_id is not None and not valid_job_id(job_id):
            raise ValueError(f"{ENV_JOB_ID}: must be 1-64 characters of A-Z a-z 0-9 . _ - : "
                             f"@ +, got {job_id!r}")
        directory = env.get(ENV_CHECKPOINT_DIR) or None
        return cls(job_id=job_id, checkpoint_dir=Path(directory) if directory else None,
                   epochs=_env_int(env, ENV_EPOCHS, 1),
                   restart_count=_env_int(env, ENV_RESTART_COUNT, 0) or 0)


def _env_int(env: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ValueError(f"{name}: must be a whole number >= {minimum}, got {raw!r}")
    return value


def job_environment(job_id: str, checkpoint_dir: str | Path, epochs: int,
                    restart_count: int = 0) -> dict[str, str]:
    """The variables the executor passes to a job's container."""
    if not valid_job_id(job_id):
        raise ValueError(f"job id must be 1-64 characters of A-Z a-z 0-9 . _ - : @ +, "
                         f"got {job_id!r}")
    positive_int(epochs, "epochs")
    if isinstance(restart_count, bool) or not isinstance(restart_count, int) \
            or restart_count < 0:
        raise ValueError(f"restart_count must be a whole number >= 0, got {restart_count!r}")
    return {ENV_JOB_ID: job_id, ENV_CHECKPOINT_DIR: str(checkpoint_dir),
            ENV_EPOCHS: str(epochs), ENV_RESTART_COUNT: str(restart_count)}


@dataclass(frozen=True, kw_only=True)
class JobLabels:
    """What the container labels say about a managed container."""

    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...] = ()
    gpu_milli: int | None = None
    grace_s: float | None = None          # None: not labelled (Docker's 10 s applies)
    power_limit_w: float | None = None    # None: not labelled (the store's plan applies)


def container_labels(job_id: str, attempt: int, gpu_uuids: tuple[str, ...] | list[str] = (),
                     gpu_milli: int | None = None,
                     grace_s: float | None = None,
                     power_limit_w: float | None = None) -> dict[str, str]:
    """The labels the executor puts on a job's container."""
    if not valid_job_id(job_id):
        raise ValueError(f"job id must be 1-64 characters of A-Z a-z 0-9 . _ - : @ +, "
                         f"got {job_id!r}")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise ValueError(f"attempt must be a whole number >= 0, got {attempt!r}")
    for uuid in gpu_uuids:
        if not isinstance(uuid, str) or not uuid or "," in uuid or uuid != uuid.strip():
            raise ValueError(f"GPU UUID must be a non-empty string without commas or "
                             f"surrounding spaces, got {uuid!r}")
    labels = {LABEL_JOB: job_id, LABEL_ATTEMPT: str(attempt), LABEL_GPUS: ",".join(gpu_uuids)}
    if gpu_milli is not None:
        if isinstance(gpu_milli, bool) or not isinstance(gpu_milli, int) \
                or not 1 <= gpu_milli <= 999:
            raise ValueError(f"gpu_milli must be a whole number 1-999, got {gpu_milli!r}")
        labels[LABEL_GPU_MILLI] = str(gpu_milli)
    if grace_s is not None:
        if not _grace_ok(grace_s):
            raise ValueError(f"grace_s must be a finite number >= 0, got {grace_s!r}")
        labels[LABEL_GRACE] = f"{float(grace_s):g}"
    if power_limit_w is not None:
        if not _limit_ok(power_limit_w):
            raise ValueError(f"power_limit_w must be a number in (0, {MAX_POWER_LIMIT_W:g}] W, "
                             f"got {power_limit_w!r}")
        labels[LABEL_POWER_LIMIT] = f"{float(power_limit_w):g}"
    return labels


def _grace_ok(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _limit_ok(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0 < value <= MAX_POWER_LIMIT_W)


def job_labels(labels: Mapping[str, str] | None) -> JobLabels | None:
    """Read a container's labels: None for a container andreas does not manage (no
    ``andreas.job``); ValueError naming the label for a managed one with a bad value."""
    if not labels or LABEL_JOB not in labels:
        return None
    job_id = labels[LABEL_JOB]
    if not valid_job_id(job_id):
        raise ValueError(f"label {LABEL_JOB}: not a valid job id: {job_id!r}")
    raw = labels.get(LABEL_ATTEMPT)
    if raw is None or WHOLE_NUMBER.fullmatch(raw.strip()) is None:
        raise ValueError(f"label {LABEL_ATTEMPT}: must be a whole number >= 0, got {raw!r}")
    gpus = tuple(u.strip() for u in (labels.get(LABEL_GPUS) or "").split(",") if u.strip())
    share = labels.get(LABEL_GPU_MILLI)
    milli = None
    if share is not None:
        if WHOLE_NUMBER.fullmatch(share.strip()) is None or not 1 <= int(share) <= 999:
            raise ValueError(f"label {LABEL_GPU_MILLI}: must be a whole number 1-999, got "
                             f"{share!r}")
        milli = int(share)
    grace = None
    if labels.get(LABEL_GRACE) is not None:
        try:
            grace = float(labels[LABEL_GRACE])
        except ValueError:
            grace = None
        if grace is None or not _grace_ok(grace):
            raise ValueError(f"label {LABEL_GRACE}: must be a finite number >= 0, got "
                             f"{labels[LABEL_GRACE]!r}")
    return JobLabels(job_id=job_id, attempt=int(raw.strip()), gpu_uuids=gpus, gpu_milli=milli,
                     grace_s=grace, power_limit_w=_label_limit(labels.get(LABEL_POWER_LIMIT)))


def _label_limit(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not _limit_ok(value):
        raise ValueError(f"label {LABEL_POWER_LIMIT}: must be a number in "
                         f"(0, {MAX_POWER_LIMIT_W:g}] W, got {raw!r}")
    return value

