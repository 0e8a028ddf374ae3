"""The job contract: what a training image must do to run under andreas.

This package is the single definition of the contract (docs/design/job-contract.md) for
both sides: the training code inside a container (progress lines, checkpoints, SIGTERM)
and andreas itself (the executor sets the environment and the container labels; the
node agent parses the progress lines). It uses the standard library only, imports
nothing from andreas outside itself and its modules import each other relatively, so a
training image may install andreas or copy this one directory: as ``andreas/job/`` next
to the training script (``from andreas import job`` then works as a namespace package),
or under any name (``job/``, then ``import job``). Modules: :mod:`.names` (environment,
labels, exit codes, job ids), :mod:`.progress` (the line format and
:class:`EpochReporter`), :mod:`.checkpoint`, :mod:`.signals` (:class:`GracefulStop`),
:mod:`.callbacks` (Keras, Lightning; no framework imported at module import).

Environment: ``ANDREAS_JOB_ID``, ``ANDREAS_CHECKPOINT_DIR`` (a directory that follows the
job across nodes), ``ANDREAS_EPOCHS``, ``ANDREAS_RESTART_COUNT``. Container labels:
``andreas.job``, ``andreas.attempt``, ``andreas.gpus``. One progress line per epoch start
and end (anything may precede the marker, nothing may follow; see
:func:`format_progress` and :func:`parse_progress`)::

    ANDREAS-PROGRESS v1 job=j00042 epoch=3 of=10 event=end t=1716212345.123456 loss=0.4121

After every epoch the checkpoint is written atomically, then the manifest ``latest.json``
(:func:`save_checkpoint`). Exit codes: 0 all epochs done; 143 stopped on request,
resumable; 137 killed, resume from the manifest; anything else a failure. A plain loop::

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
from .progress import (EVENTS, PROGRESS_MARKER, PROGRESS_VERSION, EpochBoundary, EpochProgress,
                       EpochReporter, ProgressEvent, format_progress, parse_progress)
from .signals import GracefulStop

__all__ = [
    "DEFAULT_LOCAL_JOB_ID", "ENV_CHECKPOINT_DIR", "ENV_EPOCHS", "ENV_JOB_ID",
    "ENV_RESTART_COUNT", "EVENTS", "EXIT_DONE", "EXIT_KILLED", "EXIT_PREEMPTED",
    "LABEL_ATTEMPT", "LABEL_GPUS", "LABEL_JOB", "MANIFEST_FORMAT", "MANIFEST_NAME",
    "PROGRESS_MARKER", "PROGRESS_VERSION", "Checkpoint", "EpochBoundary", "EpochProgress",
    "EpochReporter", "GracefulStop", "JobEnv", "JobLabels", "KerasProgressCallback",
    "LightningProgressCallback", "ProgressEvent", "atomic_write", "checkpoint_name",
    "completed_epochs", "container_labels", "format_progress", "job_environment",
    "job_labels", "keras_callback", "latest_checkpoint", "lightning_callback",
    "parse_progress", "read_manifest", "resume_epoch", "save_checkpoint", "valid_job_id",
    "write_manifest",
]
