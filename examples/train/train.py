"""A tiny CPU training job that follows the andreas job contract exactly.

It exists so that andreas can be tried and tested end to end without GPUs or big
images: a 1-hidden-layer MLP (numpy only) learns a synthetic binary task made by a fixed
random "teacher" network, with minibatch SGD. Everything the contract asks for is here:

- reads ``ANDREAS_JOB_ID``, ``ANDREAS_CHECKPOINT_DIR``, ``ANDREAS_EPOCHS`` and
  ``ANDREAS_RESTART_COUNT`` (``job.JobEnv``);
- resumes from the newest complete checkpoint (``job.latest_checkpoint``);
- prints the ``ANDREAS-PROGRESS v1`` start/end line of every epoch with ``loss``,
  ``acc`` and ``steps`` (``job.EpochReporter``);
- after every epoch writes the checkpoint atomically and then the manifest
  (``job.save_checkpoint``);
- on SIGTERM stops at once: the partial epoch is discarded (no end line, no
  checkpoint), the last complete epoch's checkpoint stays, exit code 143;
- exit code 0 once all epochs are done.

The checkpoint (``epoch-NNNNNN.npz``, a few tens of KiB) carries the weights, the global
step and the *epoch history*: ``[{"epoch": n, "restart_count": r, "t": unix_s}, ...]``
for every completed epoch across restarts, so a test can check that a job that was
preempted and moved ran epochs 1..N exactly once each (``history.py`` prints it).

Work per epoch: ``EXAMPLE_STEPS`` minibatch steps when set, else as many steps
as fit in ``EXAMPLE_EPOCH_S`` seconds (default 2), stretched by co-location on fake
GPUs: with ``ANDREAS_FAKE_GPU_DIR`` / ``ANDREAS_FAKE_GPUS`` (the executor's
``fake_gpu_dir``) and ``EXAMPLE_CONTENTION`` = c > 0, an epoch takes ``1 + c * k`` times
as long while k other jobs mark the same fake GPU (a heartbeat file per job and GPU),
the slowdown two jobs sharing a real GPU would see; and under a power limit that
``andreas-powerd`` set on the fake GPU (the file ``power-limit-<uuid>`` there, mW), an epoch
takes the application's time factor at that limit longer (``EXAMPLE_POWER_FACTORS``, e.g.
``175:1.096,150:1.18``, watts:factor; other limits 1), as a real GPU would, and the
epoch's history entry records the limit. ``EXAMPLE_SEED``
(default 1234) fixes the data and the initial weights; the minibatch order of epoch n is
drawn from (seed, n), so a resumed run samples what an uninterrupted one would.

``from andreas import job`` finds the contract package: in the image a copy of
``andreas/job/`` next to this file (a namespace package, no ``andreas/__init__.py``), in
the repository the package itself.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Small matrices: BLAS threads only add overhead (and take the node's other cores).
    # Only as a program: an importer's environment (and its children's) stays its own.
    for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

import numpy as np

from andreas import job

ENV_EPOCH_S = "EXAMPLE_EPOCH_S"
ENV_STEPS = "EXAMPLE_STEPS"
ENV_SEED = "EXAMPLE_SEED"
ENV_CONTENTION = "EXAMPLE_CONTENTION"
ENV_POWER_FACTORS = "EXAMPLE_POWER_FACTORS"
DEFAULT_EPOCH_S = 2.0
DEFAULT_SEED = 1234
DEFAULT_EPOCHS = 3                      # outside andreas, without ANDREAS_EPOCHS
FORMAT = "andreas-example/1"
SUFFIX = ".npz"

SAMPLES, FEATURES, HIDDEN, TEACHER_HIDDEN = 4096, 32, 64, 16
BATCH = 128
LR0, LR_DECAY_STEPS = 0.05, 2000.0


@dataclass
class State:
    """Everything a checkpoint holds: weights, global step, completed-epoch history."""

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray
    step: int = 0
    epoch: int = 0
    seed: int = DEFAULT_SEED
    history: list[dict[str, Any]] = field(default_factory=list)


def make_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The synthetic task: labels from a random tanh teacher, so the student can fit it
    and the loss keeps falling for many epochs."""
    rng = np.random.default_rng([seed, 0])
    x = rng.standard_normal((SAMPLES, FEATURES))
    t1 = rng.standard_normal((FEATURES, TEACHER_HIDDEN)) / math.sqrt(FEATURES)
    t2 = rng.standard_normal(TEACHER_HIDDEN)
    y = (np.tanh(x @ t1) @ t2 > 0).astype(np.float64)
    return x, y


def initial_state(seed: int) -> State:
    rng = np.random.default_rng([seed, 1])
    return State(w1=rng.standard_normal((FEATURES, HIDDEN)) / math.sqrt(FEATURES),
                 b1=np.zeros(HIDDEN), w2=rng.standard_normal(HIDDEN) / math.sqrt(HIDDEN),
                 b2=np.zeros(1), seed=seed)


def _forward(s: State, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.tanh(x @ s.w1 + s.b1)
    return h, h @ s.w2 + s.b2[0]


def evaluate(s: State, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean binary cross-entropy and accuracy on the whole training set."""
    _, z = _forward(s, x)
    loss = np.mean(np.logaddexp(0.0, z) - y * z)
    return float(loss), float(np.mean((z > 0) == (y > 0.5)))


def sgd_step(s: State, xb: np.ndarray, yb: np.ndarray) -> None:
    h, z = _forward(s, xb)
    g = (1.0 / (1.0 + np.exp(-z)) - yb) / len(yb)           # d loss / d z
    gh = np.outer(g, s.w2) * (1.0 - h * h)
    lr = LR0 / math.sqrt(1.0 + s.step / LR_DECAY_STEPS)
    s.w2 -= lr * (h.T @ g)
    s.b2 -= lr * g.sum()
    s.w1 -= lr * (xb.T @ gh)
    s.b1 -= lr * gh.sum(axis=0)
    s.step += 1


class Stopped(Exception):
    """SIGTERM arrived during an epoch: that epoch is abandoned."""


def train_epoch(s: State, x: np.ndarray, y: np.ndarray, epoch: int, *,
                steps: int | None, seconds: float, stop: job.GracefulStop) -> int:
    """Run one epoch's minibatch steps (a fixed count, or until ``seconds`` passed);
    raise Stopped as soon as a stop is requested. Returns the steps taken."""
    rng = np.random.default_rng([s.seed, 2, epoch])
    deadline = time.monotonic() + seconds
    done = 0
    order = rng.permutation(SAMPLES)
    cursor = 0
    while True:
        if stop.requested:
            raise Stopped
        if steps is not None and done >= steps:
            break
        if steps is None and done > 0 and time.monotonic() >= deadline:
            break
        if cursor + BATCH > SAMPLES:
            order, cursor = rng.permutation(SAMPLES), 0
        idx = order[cursor:cursor + BATCH]
        cursor += BATCH
        sgd_step(s, x[idx], y[idx])
        done += 1
    return done


class FakeContention:
    """Co-location on fake GPUs (module docstring): ``factor()`` marks this job's fake GPUs
    and returns 1 + c * (other jobs that marked one of them within ``window_s``)."""

    def __init__(self, job_id: str, contention: float, window_s: float) -> None:
        root = os.environ.get("ANDREAS_FAKE_GPU_DIR", "")
        gpus = [u for u in os.environ.get("ANDREAS_FAKE_GPUS", "").split(",") if u]
        self.active = bool(root and gpus and contention > 0 and os.path.isdir(root))
        self.dirs = [Path(root) / u for u in gpus] if self.active else []
        self.job_id, self.contention, self.window_s = job_id, contention, window_s

    def factor(self) -> float:
        if not self.active:
            return 1.0
        now = time.time()
        others: set[str] = set()
        for d in self.dirs:
            d.mkdir(exist_ok=True)
            (d / self.job_id).touch()
            for f in d.iterdir():
                try:
                    fresh = now - f.stat().st_mtime <= self.window_s
                except FileNotFoundError:
                    continue
                if f.name != self.job_id and fresh:
                    others.add(f.name)
        return 1.0 + self.contention * len(others)

    def leave(self) -> None:
        for d in self.dirs:
            (d / self.job_id).unlink(missing_ok=True)


class FakePowerLimit:
    """The power limit of this job's first fake GPU and its epoch time factor there
    (module docstring); ``(None, 1.0)`` without fake GPUs or a limit file."""

    def __init__(self, factors: str) -> None:
        root = os.environ.get("ANDREAS_FAKE_GPU_DIR", "")
        gpus = [u for u in os.environ.get("ANDREAS_FAKE_GPUS", "").split(",") if u]
        self.file = Path(root) / f"power-limit-{gpus[0]}" if root and gpus else None
        self.factors: dict[float, float] = {}
        for part in (p for p in factors.split(",") if p.strip()):
            watts, _, factor = part.partition(":")
            self.factors[float(watts)] = float(factor)
            if not (math.isfinite(self.factors[float(watts)])
                    and self.factors[float(watts)] > 0):
                raise ValueError(f"{ENV_POWER_FACTORS}: factor must be > 0 in {part!r}")

    def now(self) -> tuple[float | None, float]:
        if self.file is None:
            return None, 1.0
        try:
            watts = int(self.file.read_text().strip()) / 1000.0
        except (OSError, ValueError):
            return None, 1.0
        return watts, self.factors.get(watts, 1.0)


# --- checkpoints ---------------------------------------------------------------------

def save_state(s: State, path: Path) -> None:
    """Write the npz to ``path`` (a temporary name chosen by job.atomic_write; a file
    object keeps np.savez from appending ".npz")."""
    meta = {"format": FORMAT, "epoch": s.epoch, "step": s.step, "seed": s.seed,
            "shape": [FEATURES, HIDDEN]}
    with open(path, "wb") as f:
        np.savez(f, w1=s.w1, b1=s.b1, w2=s.w2, b2=s.b2, meta=np.array(json.dumps(meta)),
                 history=np.array(json.dumps(s.history)))


def load_state(path: str | Path) -> State:
    """Read a checkpoint written by :func:`save_state`; ValueError if it is not one."""
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"].item()))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not an {FORMAT} checkpoint: {meta.get('format')!r}")
        if meta.get("shape") != [FEATURES, HIDDEN]:
            raise ValueError(f"{path}: model shape {meta.get('shape')} is not "
                             f"{[FEATURES, HIDDEN]}")
        return State(w1=data["w1"].copy(), b1=data["b1"].copy(), w2=data["w2"].copy(),
                     b2=data["b2"].copy(), step=int(meta["step"]), epoch=int(meta["epoch"]),
                     seed=int(meta["seed"]),
                     history=json.loads(str(data["history"].item())))


def read_history(checkpoint_dir: str | Path) -> list[dict[str, Any]]:
    """The epoch history of the newest complete checkpoint ([] without one)."""
    latest = job.latest_checkpoint(checkpoint_dir)
    return [] if latest is None else load_state(latest.path).history


# --- main ----------------------------------------------------------------------------

def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    value = float(raw)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: must be a number > 0, got {raw!r}")
    return value


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    value = int(raw)
    if value < 1:
        raise ValueError(f"{name}: must be a whole number >= 1, got {raw!r}")
    return value


def _log(message: str) -> None:
    print(f"train: {message}", file=sys.stderr, flush=True)


def main() -> int:
    stop = job.GracefulStop().install()           # first, so no SIGTERM is lost
    try:
        env = job.JobEnv.from_environ()
        epoch_s = _env_float(ENV_EPOCH_S, DEFAULT_EPOCH_S)
        steps = _env_int(ENV_STEPS, None)
        seed = _env_int(ENV_SEED, DEFAULT_SEED)
        contention = float(os.environ.get(ENV_CONTENTION, "0") or 0)
        if not (math.isfinite(contention) and contention >= 0):
            raise ValueError(f"{ENV_CONTENTION}: must be a number >= 0, got {contention!r}")
        limit = FakePowerLimit(os.environ.get(ENV_POWER_FACTORS, ""))
    except ValueError as e:
        _log(str(e))
        return 2
    assert seed is not None
    epochs = env.epochs or DEFAULT_EPOCHS
    reporter = job.EpochReporter(epochs=epochs)
    directory = env.checkpoint_dir
    if directory is None:
        _log(f"{job.ENV_CHECKPOINT_DIR} is not set: training without checkpoints")

    latest = job.latest_checkpoint(directory)
    if latest is not None:
        state = load_state(latest.path)
        if state.epoch != latest.epoch:
            raise ValueError(f"{latest.path}: holds epoch {state.epoch}, named {latest.epoch}")
        _log(f"resuming after epoch {state.epoch} from {latest.path.name} "
             f"(restart {env.restart_count})")
    else:
        state = initial_state(seed)
    x, y = make_data(state.seed)
    shared = FakeContention(env.job_id or "example", contention, window_s=3 * epoch_s)
    try:
        return _train(state, x, y, epochs, env, reporter, directory, stop, steps, epoch_s,
                      shared, limit)
    finally:
        shared.leave()


def _train(state: State, x: np.ndarray, y: np.ndarray, epochs: int, env: job.JobEnv,
           reporter: job.EpochReporter, directory: Path | None, stop: job.GracefulStop,
           steps: int | None, epoch_s: float, shared: FakeContention,
           limit: FakePowerLimit) -> int:
    for epoch in range(state.epoch + 1, epochs + 1):
        stop.exit_if_requested()
        try:
            with reporter.epoch(epoch) as ep:
                watts, stretch = limit.now()
                done = train_epoch(state, x, y, epoch, steps=steps,
                                   seconds=epoch_s * shared.factor() * stretch, stop=stop)
                loss, acc = evaluate(state, x, y)
                state.epoch = epoch
                state.history.append({"epoch": epoch, "restart_count": env.restart_count,
                                      "t": time.time(),
                                      **({"power_limit_w": watts} if watts else {})})
                if directory is not None:
                    job.save_checkpoint(directory, epoch, lambda p: save_state(state, p),
                                        suffix=SUFFIX)
                ep.metrics.update(loss=loss, acc=acc, steps=done)
        except Stopped:
            _log(f"stopped during epoch {epoch}: discarded it, epoch {epoch - 1} is the "
                 f"last checkpoint; exiting with {job.EXIT_PREEMPTED}")
            return job.EXIT_PREEMPTED
    stop.exit_if_requested()       # a SIGTERM during the last save: still "stopped"
    return job.EXIT_DONE


if __name__ == "__main__":
    sys.exit(main())
