"""The job contract: what a training image must do to run under andreas.

This package is the single definition of the contract (ARCHITECTURE.md, "The job
contract") for both sides: the training code inside a container (progress lines,
checkpoints, SIGTERM) and andreas itself (the executor sets the environment and the
container labels; the node agent parses the progress lines). It uses the standard
library only, imports nothing from andreas outside itself and its modules import each
other relatively, so a training image may install andreas or copy this one directory:
as ``andreas/job/`` next to the training script (``from andreas import job`` then works
without an ``andreas/__init__.py``: a namespace package), or under any name (``job/``,
then ``import job``). Modules: :mod:`.names` (environment, labels, exit codes, job ids),
:mod:`.progress` (the line format and :class:`EpochReporter`), :mod:`.checkpoint`,
:mod:`.signals` (:class:`GracefulStop`), :mod:`.callbacks` (Keras, Lightning).

Environment (set by the executor for every container)
    ``ANDREAS_JOB_ID``          the job's id
    ``ANDREAS_CHECKPOINT_DIR``  a mounted directory that follows the job across nodes
    ``ANDREAS_EPOCHS``          the target number of epochs
    ``ANDREAS_RESTART_COUNT``   0 on the first attempt, then 1, 2, ...

Container labels (set by the executor, read by the agent)
    ``andreas.job=<job id>``, ``andreas.attempt=<n>``,
    ``andreas.gpus=<comma-separated GPU UUIDs>`` (may be empty)

Progress line, format v1 (one per epoch start and one per epoch end, on stdout or stderr)::

    ANDREAS-PROGRESS v1 job=<id> epoch=<n> of=<N> event=<start|end> t=<unix seconds> \
        [<metric>=<number> ...]

    ANDREAS-PROGRESS v1 job=j00042 epoch=3 of=10 event=end t=1716212345.123456 loss=0.4121

- Epochs are numbered from 1 to N (``epoch=1 of=10`` is the first of ten).
- ``t`` is UTC seconds since the epoch with a fractional part (``time.time()``),
  digits and at most one dot, nothing else.
- The fields are space-separated ``key=value`` tokens, the five required ones exactly
  once each; :func:`format_progress` writes them in the order above. Further tokens are
  metrics: a name (a letter or ``_`` first, then letters, digits, ``_`` or ``.``) and a
  number (``0.25``, ``1e-05``, ``nan``, ``inf``). Nothing else may follow the marker.
- ``job`` is 1 to 64 characters of ``A-Z a-z 0-9 . _ - : @ +``.
- Anything may *precede* the marker (Docker's timestamp, a logger prefix, the rest of a
  progress bar ended by a carriage return); a line that holds the marker several times
  is read from the last one.
- A reader accepts only version 1 lines; a later format gets a new version token.
  :func:`parse_progress` returns ``None`` for anything that is not a valid v1 line and
  never raises.

Checkpoints: after every epoch write the checkpoint atomically (a temporary name in the
same directory, fsync, rename) and then the manifest ``latest.json``::

    {"format": "andreas-checkpoint/1", "epoch": 5, "time": 1716212345.1,
     "path": "epoch-000005.ckpt"}

``path`` is relative to the checkpoint directory (it is mounted at different places on
different nodes); ``epoch`` is the last *completed* epoch. :func:`save_checkpoint` does
both; :func:`resume_epoch` tells a starting job which epoch to run next.

Exit codes: 0 all epochs done; 143 stopped on request (SIGTERM), resumable; 137 killed,
resume from the manifest; anything else a failure. :class:`GracefulStop` turns SIGTERM
into a flag the training loop checks after each epoch (or batch), so it can checkpoint
and exit 143 within the grace period.

Training-loop helpers: :class:`EpochReporter` (prints and flushes the start/end lines),
:class:`KerasProgressCallback` / :func:`keras_callback` and
:class:`LightningProgressCallback` / :func:`lightning_callback` (framework callbacks that
import no framework at module import).

A plain loop::

    from andreas import job

    env = job.JobEnv.from_environ()
    reporter = job.EpochReporter()
    stop = job.GracefulStop().install()
    state = load(job.latest_checkpoint(env.checkpoint_dir))       # None: start fresh
    for epoch in range(job.resume_epoch(env.checkpoint_dir), env.epochs + 1):
        with reporter.epoch(epoch) as ep:
            ep.metrics["loss"] = train_one_epoch(state)
            job.save_checkpoint(env.checkpoint_dir, epoch, lambda p: save(state, p))
        stop.exit_if_requested()                                     # SystemExit(143)
"""

from .callbacks import (KerasProgressCallback, LightningProgressCallback, keras_callback,
                        lightning_callback)
from .checkpoint import (MANIFEST_FORMAT, MANIFEST_NAME, Checkpoint, atomic_write,
                         checkpoint_name, completed_epochs, latest_checkpoint, read_manifest,
                         resume_epoch, save_checkpoint, write_manifest)
from .names import (DEFAULT_LOCAL_JOB_ID, ENV_CHECKPOINT_DIR, ENV_EPOCHS, ENV_JOB_ID,
                    ENV_RESTART_COUNT, EXIT_DONE, EXIT_KILLED, EXIT_PREEMPTED, LABEL_ATTEMPT,
                    LABEL_GPUS, LABEL_JOB, JobEnv, JobLabels, container_labels,
                    job_environment, job_labels, valid_job_id)
from .progress import (EVENTS, PROGRESS_MARKER, PROGRESS_VERSION, EpochProgress,
                       EpochReporter, ProgressEvent, format_progress, parse_progress)
from .signals import GracefulStop

__all__ = [
    "DEFAULT_LOCAL_JOB_ID", "ENV_CHECKPOINT_DIR", "ENV_EPOCHS", "ENV_JOB_ID",
    "ENV_RESTART_COUNT", "EVENTS", "EXIT_DONE", "EXIT_KILLED", "EXIT_PREEMPTED",
    "LABEL_ATTEMPT", "LABEL_GPUS", "LABEL_JOB", "MANIFEST_FORMAT", "MANIFEST_NAME",
    "PROGRESS_MARKER", "PROGRESS_VERSION", "Checkpoint", "EpochProgress", "EpochReporter",
    "GracefulStop", "JobEnv", "JobLabels", "KerasProgressCallback",
    "LightningProgressCallback", "ProgressEvent", "atomic_write", "checkpoint_name",
    "completed_epochs", "container_labels", "format_progress", "job_environment",
    "job_labels", "keras_callback", "latest_checkpoint", "lightning_callback",
    "parse_progress", "read_manifest", "resume_epoch", "save_checkpoint", "valid_job_id",
    "write_manifest",
]
