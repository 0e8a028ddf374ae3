"""What users do to jobs: submit one (from options or a job.yaml) and cancel one.

Everything a user typed is checked before the store is touched, so a bad submission leaves
nothing behind; each problem is one :class:`InputError` naming the field and the value as
the user wrote it (``--due '+0h': not in the future``, ``job.yaml: epochs 0: must be >=
1``). A submission is one transaction: the job row in state ``queued``; the manager picks
it up at its next rescheduling point.

Job ids become Docker container names (``andreas-<id>-<attempt>``) and checkpoint
directories, so they are restricted to ``[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`` and are unique
ignoring case (MariaDB compares them that way, and so do case-insensitive file systems).
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

from andreas import jobspec
from andreas.config import Settings
from andreas.errors import InputError, one_line
from andreas.infra import nudge
from andreas.infra.fileio import read_text_capped
from andreas.limits import REASON_CHARS
from andreas.infra.timefmt import parse_duration, stamp
from andreas.jobspec import image_allowed

if TYPE_CHECKING:   # SQLAlchemy is imported where the store is used (not by `submit`)
    from andreas.store.engine import Store
    from andreas.store.tables import JobState

JOB_ID_RE = re.compile(jobspec.JOB_ID)
APP_RE = re.compile(jobspec.APPLICATION)
ENV_NAME_RE = re.compile(jobspec.ENV_NAME)
IMAGE_RE = re.compile(jobspec.IMAGE)
RESERVED_ENV_PREFIX = jobspec.RESERVED_ENV_PREFIX
RESERVED_ENV = frozenset(jobspec.RESERVED_ENV)
MAX_DUE_AHEAD_S = jobspec.MAX_DUE_AHEAD_S
MAX_REASON = REASON_CHARS
FILE_KEYS = ("image", "epochs", "due", "weight", "app", "cmd", "env", "max_gpus", "grace_s",
             "name", "gpu_share", "gpu_memory_mib")
MAX_GPU_MEMORY_MIB = jobspec.MAX_GPU_MEMORY_MIB
MAX_EPOCHS = jobspec.MAX_EPOCHS
MAX_WEIGHT = jobspec.MAX_WEIGHT
MAX_GPUS = jobspec.MAX_GPUS
MAX_JOB_FILE_BYTES = 1 << 20
REQUIRED = ("epochs", "due", "weight")        # and an image or a cmd (or both)

# Docker image references (distribution/reference grammar, sha256 digests only).
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_DOMAIN = re.compile(jobspec.DOMAIN)
_TAG = re.compile(jobspec.TAG)
_DIGEST = re.compile(jobspec.DIGEST)
_NUMBER = re.compile(r"[+]?[0-9]+(?:\.[0-9]+)?")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_DATE_ONLY = re.compile(r"\d{4}-?\d{2}-?\d{2}")


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """A checked submission. ``grace_s`` None: the configured default
    (``[executor] stop_grace_s``); ``command`` empty: the image's own CMD; ``image`` empty:
    a command job (``--cmd`` without an image), which the Slurm executor runs."""

    id: str
    image: str
    epochs: int
    due_s: float
    weight: float                       # tardiness penalty, currency per second late
    application: str
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    max_gpus: int | None = None
    grace_s: float | None = None
    gpu_milli: int | None = None        # a share of one GPU (1-999 milli); None: whole GPUs
    gpu_memory_mib: int | None = None

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


class _Labels:
    """How a field is named in messages: ``--due`` on the command line, ``FILE: due``."""

    def __init__(self, file: str | None):
        self.file = file

    def __call__(self, field: str) -> str:
        if self.file is not None:
            return f"{self.file}: {field}"
        return "IMAGE" if field == "image" else "--" + field.replace("_", "-")


def _token_hex(nbytes: int) -> str:
    """``secrets.token_hex``: hex of ``os.urandom``, the same source, without importing
    ``secrets`` (its ``hmac`` and ``random`` lengthen every ``andreas submit``)."""
    return os.urandom(nbytes).hex()


def parse_submission(*, image: Any = None, epochs: Any, due: Any, weight: Any, app: Any = None,
                     cmd: Any = None, env: Any = None, max_gpus: Any = None,
                     grace_s: Any = None, name: Any = None, gpu_share: Any = None,
                     gpu_memory_mib: Any = None, now_s: float,
                     file: str | None = None,
                     token_hex: Callable[[int], str] = _token_hex) -> JobSpec:
    """Check every field and build the JobSpec; values may be strings (command line) or
    YAML scalars. ``file``: the job.yaml the values come from (named in messages).
    ``token_hex``: the random part of a generated id (tests pass a fixed one)."""
    label = _Labels(file)
    if image is None and cmd is not None:       # a command job: no image, an application
        ref = ""
        if app is None:
            raise InputError(f"{label('app')} is required for a job without an image "
                             "(--cmd alone): the application names its epoch-time profile")
    else:
        ref = parse_image(image, label("image"))
    job_id = (parse_job_id(name, label("name")) if name is not None
              else generate_id(now_s, token_hex))
    milli = None if gpu_share is None else parse_gpu_share(gpu_share, label("gpu_share"))
    cap = (None if max_gpus is None
           else _int(max_gpus, label("max_gpus"), minimum=1, maximum=MAX_GPUS))
    if milli is not None and cap is not None and cap > 1:
        raise InputError(f"{label('max_gpus')} {_shown(max_gpus)}: a job with a GPU share "
                         "runs on one GPU; leave max_gpus out or set it to 1")
    memory = None
    if gpu_memory_mib is not None:
        memory = _int(gpu_memory_mib, label("gpu_memory_mib"), minimum=1,
                      maximum=MAX_GPU_MEMORY_MIB)
    return JobSpec(
        id=job_id, image=ref,
        epochs=_int(epochs, label("epochs"), minimum=1, maximum=MAX_EPOCHS),
        due_s=parse_due(due, now_s, label("due")),
        weight=_number(weight, label("weight"), minimum=0.0, maximum=MAX_WEIGHT),
        application=(_application(app, label("app")) if app is not None
                     else default_application(ref)),
        command=_nonempty(_command(cmd, label("cmd")), ref, label("cmd")),
        env=_env(env, label("env")),
        max_gpus=cap,
        grace_s=None if grace_s is None else _number(grace_s, label("grace_s"), minimum=0.0,
                                                     maximum=jobspec.MAX_GRACE_S, open_min=True),
        gpu_milli=milli, gpu_memory_mib=memory)


def parse_gpu_share(value: Any, label: str = "--gpu-share") -> int:
    """A share of one GPU as a fraction (``0.25``) or a percentage (``25%``), in milli-GPU
    (1-999): the job runs beside others on one GPU, bounded by the GPU-sharing policies."""
    text = value.strip() if isinstance(value, str) else value
    percent = isinstance(text, str) and text.endswith("%")
    try:
        x = float(text[:-1] if percent else text)
    except (TypeError, ValueError):
        x = math.nan
    if isinstance(value, bool) or not math.isfinite(x):
        raise InputError(f"{label} {_shown(value)}: a share of one GPU, e.g. 0.25 or 25%")
    milli = round(x * (10 if percent else 1000))
    if not 1 <= milli <= 999:
        raise InputError(f"{label} {_shown(value)}: must be above 0 and below one whole GPU "
                         "(0.001-0.999 or 0.1%-99.9%); for whole GPUs leave it out")
    return milli


def load_job_file(path: str | Path, *, now_s: float,
                  token_hex: Callable[[int], str] = _token_hex) -> JobSpec:
    """A job.yaml: a mapping with the keys of :data:`FILE_KEYS` (the command line options'
    names, ``max_gpus`` and ``grace_s`` with underscores); unknown or repeated keys are
    errors, so a typo never falls back to a default silently."""
    import yaml

    from andreas.formats.strict import RepeatedKey, yaml_loads

    shown = str(path)
    text = read_text_capped(path, what="job file", limit=MAX_JOB_FILE_BYTES, label=shown)
    try:
        data = yaml_loads(text)
    except RecursionError:
        raise InputError(f"{shown}: not valid YAML: nested too deeply") from None
    except (ValueError, OverflowError) as e:         # a timestamp YAML cannot represent
        raise InputError(f"{shown}: not valid YAML: {one_line(str(e))}") from None
    except RepeatedKey as e:
        raise InputError(f"{shown}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or "syntax error"
        raise InputError(f"{shown}: not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(f"{shown}: must be a mapping of job fields (image, epochs, due, "
                         f"weight, ...), got {type(data).__name__}")
    for key in data:
        if key not in FILE_KEYS:
            raise InputError(f"{shown}: unknown key {str(key)!r} (known: "
                             f"{', '.join(FILE_KEYS)})")
    for key in REQUIRED:
        if data.get(key) is None:
            raise InputError(f"{shown}: {key} is missing (required: image or cmd, "
                             f"{', '.join(REQUIRED)})")
    if data.get("image") is None and data.get("cmd") is None:
        raise InputError(f"{shown}: image is missing (required: image or cmd, "
                         f"{', '.join(REQUIRED)})")
    return parse_submission(**data, now_s=now_s, file=shown, token_hex=token_hex)


def submit(store: Store, spec: JobSpec, now_s: float, *, default_grace_s: float = 120.0) -> str:
    """Store the job as ``queued`` in one transaction and wake the manager; returns its
    id. A job with the same id (ignoring case) is an InputError, also when two
    submissions race."""
    from andreas.store.submissions import JobIdTaken, NewJob, add_job

    grace = spec.grace_s if spec.grace_s is not None else default_grace_s
    try:
        add_job(store, NewJob(id=spec.id, image=spec.image, command=spec.command,
                              env=spec.env_dict, epochs=spec.epochs, submit_s=now_s,
                              due_s=spec.due_s, weight=spec.weight,
                              application=spec.application, grace_s=grace,
                              max_gpus=spec.max_gpus, gpu_milli=spec.gpu_milli,
                              gpu_memory_mib=spec.gpu_memory_mib))
    except JobIdTaken as e:
        raise _duplicate(spec.id, e.existing) from None
    _wake(store, b"submit")
    return spec.id


def submit_configured(settings: Settings, spec: JobSpec, now_s: float) -> str:
    """What ``andreas submit`` does: store the job in the configured database and wake
    the manager, through the driver alone when it can (:mod:`andreas.store.quick`, no
    SQLAlchemy to import), else through :func:`submit`."""
    from andreas.store import quick

    grace = spec.grace_s if spec.grace_s is not None else settings.executor.stop_grace_s
    row = {"id": spec.id, "image": spec.image, "command": list(spec.command),
           "env": dict(spec.env_dict), "epochs": spec.epochs, "epochs_done": 0,
           "submit_s": now_s, "due_s": spec.due_s, "weight": spec.weight,
           "application": spec.application, "grace_s": grace, "state": "queued",
           "state_changed_s": now_s, "max_gpus": spec.max_gpus, "failures": 0,
           "reason": None, "gpu_milli": spec.gpu_milli, "gpu_memory_mib": spec.gpu_memory_mib}
    try:
        done = quick.add_job(settings.db_url, settings.db_password_file, row)
    except quick.DuplicateId as e:
        raise _duplicate(spec.id, e.existing) from None
    if done is not None:
        nudge.poke(done[1])
        return spec.id
    from andreas.store.opener import open_store

    store = open_store(settings=settings, retries=0)
    try:
        return submit(store, spec, now_s, default_grace_s=settings.executor.stop_grace_s)
    finally:
        store.dispose()


def cancel(store: Store, job_id: str, *, reason: str, now_s: float) -> tuple[str, JobState]:
    """Move a job to ``cancelled`` with ``reason``; returns (id, the state it left).

    The manager stops the container of a cancelled job. A finished job is an InputError
    (nothing to cancel); if the manager moves the job at the same instant, the move is
    retried from the new state."""
    reason = " ".join(reason.split())
    if not reason:
        raise InputError("reason '': must not be empty", field="reason")
    if len(reason) > MAX_REASON:
        raise InputError(f"reason {reason[:20]!r}...: at most {MAX_REASON} characters, got "
                         f"{len(reason)}", field="reason")
    from andreas.store.errors import TransitionConflict
    from andreas.store.submissions import cancel_job

    for _ in range(5):
        try:
            with store.session() as s:
                done = cancel_job(s, job_id, reason=reason, now_s=now_s)
            _wake(store, b"cancel")       # the manager stops its container now
            return done
        except TransitionConflict:
            continue
    raise TransitionConflict(f"job {job_id}: its state kept changing; try again")


def _wake(store: Store, what: bytes) -> None:
    """Wake the manager (a hint: a failure here must not fail a committed change)."""
    try:
        nudge.poke(store.wake_key, what)
    except Exception:  # noqa: BLE001 - the manager's poll sees the change anyway
        pass


def _duplicate(job_id: str, existing: str) -> InputError:
    same = "" if existing == job_id else f" as {existing!r} (ids are compared ignoring case)"
    return InputError(f"job id {job_id!r}: a job with this id exists already{same}; "
                      "choose another name, or leave the name out for a generated id")


def generate_id(now_s: float, token_hex: Callable[[int], str] = _token_hex) -> str:
    """``<UTC yyyymmdd-HHMMSS>-<6 hex>``: sorts by submission time, unique in practice."""
    return datetime.fromtimestamp(now_s, UTC).strftime("%Y%m%d-%H%M%S") + "-" + token_hex(3)


def parse_job_id(value: Any, label: str = "--name") -> str:
    if not isinstance(value, str) or not JOB_ID_RE.fullmatch(value):
        raise InputError(f"{label} {_shown(value)}: a job id is 1-64 characters of letters, "
                         "digits, '_', '.', '-', starting with a letter or digit")
    return value


def parse_image(value: Any, label: str = "IMAGE") -> str:
    """A Docker image reference ``[registry[:port]/]name[/...][:tag][@sha256:<64 hex>]``,
    returned as given (no default registry or tag is added: Docker does that). Accepted
    exactly when :data:`andreas.jobspec.IMAGE` matches (the database checks the same);
    the message says which part is wrong."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{label} {_shown(value)}: must be a Docker image reference like "
                         "registry.example.org/ml/train:1.0")
    if len(value) > jobspec.MAX_IMAGE_CHARS:
        raise InputError(f"{label} {_shown_short(value)}: longer than "
                         f"{jobspec.MAX_IMAGE_CHARS} characters")
    if IMAGE_RE.fullmatch(value):
        return value
    raise InputError(f"{label} {value!r}: {_image_problem(value)}")


def _image_problem(value: str) -> str:
    """Why ``value`` is not an image reference, part by part."""
    rest, at, digest = value.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        return f"digest {digest!r} must be sha256: and 64 lower-case hex digits"
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1:]
        if not _TAG.fullmatch(tag):
            return (f"tag {tag!r} must be 1-128 letters, digits, '_', '.', '-', not "
                    "starting with '.' or '-'")
    parts = rest.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost"
                           or first.lower() != first):
        if not _DOMAIN.fullmatch(first):
            return f"registry {first!r} is not a host name with an optional :port"
        parts = parts[1:]
    for part in parts:
        if not part:
            return "has an empty name component (a '/' too many)"
        if not _PATH_COMPONENT.fullmatch(part):
            if _PATH_COMPONENT.fullmatch(part.lower()):
                return f"name component {part!r} must be lower case"
            return (f"name component {part!r} may hold only lower-case letters and digits "
                    "separated by '.', '_', '__' or '-'")
    if len("/".join(parts)) > 255:
        return "repository name longer than 255 characters"
    return "not a Docker image reference like registry.example.org/ml/train:1.0"


def default_application(image: str) -> str:
    """The last path component of the image's name: ``ml/resnet50:2`` -> ``resnet50``."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name = name[:colon]
    return name.rsplit("/", 1)[-1][:128]


def parse_due(value: Any, now_s: float, label: str = "--due") -> float:
    """``+12h`` / ``+30m`` / ``+2d`` / ``+90s`` (also ``+1h30m``) from now, an ISO 8601
    date-time (UTC unless it names an offset), or unix seconds; must be in the future."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"{label} {_shown(value)}: give +12h, an ISO date-time or unix "
                         "seconds")
    if isinstance(value, datetime):
        due = _timestamp(value, label)
    elif isinstance(value, date):
        raise InputError(f"{label} {value.isoformat()!r}: a date alone is ambiguous; add a "
                         "time, e.g. 2026-11-23T18:00Z")
    elif isinstance(value, (int, float)):
        due = float(value) if abs(value) < 1e300 else math.inf
    elif isinstance(value, str):
        due = _due_text(value.strip(), now_s, label)
    else:
        raise InputError(f"{label} {_shown(value)}: give +12h, an ISO date-time or unix "
                         "seconds")
    if not math.isfinite(due):
        raise InputError(f"{label} {_shown(value)}: not a finite time")
    if due <= now_s:
        raise InputError(f"{label} {_shown(value)}: {stamp(due)} is not in the future "
                         f"(now {stamp(now_s)})")
    if due > now_s + MAX_DUE_AHEAD_S:
        raise InputError(f"{label} {_shown(value)}: more than 10 years ahead (unix "
                         "milliseconds instead of seconds?)")
    return due


def _due_text(text: str, now_s: float, label: str) -> float:
    if text.startswith("+"):
        ahead_s = parse_duration(text[1:], units="smhd")
        if ahead_s is None:
            raise InputError(f"{label} {text!r}: a relative due date is + and a number with a "
                             "unit s, m, h or d (e.g. +12h, +1h30m)")
        return now_s + ahead_s
    if _NUMBER.fullmatch(text) and not _DATE_ONLY.fullmatch(text):
        return float(text)
    if _DATE_ONLY.fullmatch(text):
        raise InputError(f"{label} {text!r}: a date alone is ambiguous; add a time, e.g. "
                         f"{text}T18:00Z")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{label} {text!r}: not +<n><s|m|h|d>, an ISO 8601 date-time "
                         "(e.g. 2026-11-23T18:00Z) or unix seconds") from None
    return _timestamp(parsed, label)


def _timestamp(value: datetime, label: str) -> float:
    """Unix seconds; UTC unless the value names an offset (a time outside what the platform
    represents, e.g. year 9999 with an offset, is an InputError, not an OverflowError)."""
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
    try:
        return aware.timestamp()
    except (OverflowError, ValueError, OSError):
        raise InputError(f"{label} {value.isoformat()!r}: not a representable time") from None


def check_runnable(spec: JobSpec, kind: str) -> None:
    """Whether ``[executor] kind`` can run the job: Docker runs images, Slurm runs
    commands (one line naming what to change when it cannot)."""
    if kind == "docker" and not spec.image:
        raise InputError("--cmd without IMAGE: the Docker executor ([executor] kind = "
                         "\"docker\") runs images; give the IMAGE the command runs in",
                         field="image")
    if kind == "slurm" and spec.image:
        raise InputError(f"IMAGE {spec.image!r}: the Slurm executor ([executor] kind = "
                         "\"slurm\") runs commands, not images; submit the command with "
                         "--cmd and no IMAGE", field="image")


def check_image_allowed(image: str, patterns: Iterable[str]) -> None:
    """Early refusal of an image that ``[executor] image_allowlist`` (fnmatch patterns)
    would refuse at start; an empty list allows every image."""
    patterns = tuple(patterns)
    if image and not image_allowed(image, patterns):
        raise InputError(f"IMAGE {image!r}: not allowed on this cluster (image_allowlist: "
                         f"{', '.join(patterns)})")


def _shown(value: Any) -> str:
    return repr(value)


def _shown_short(value: Any, limit: int = 60) -> str:
    """A value as the user gave it, cut short: a 5 000-digit number stays one line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _int(value: Any, label: str, *, minimum: int, maximum: int) -> int:
    shown = _shown_short(value)
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,30}\s*", value):
        n = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        n = maximum + 1                      # thousands of digits: int() would refuse them
    else:
        raise InputError(f"{label} {shown}: must be a whole number >= {minimum}")
    if n < minimum:
        raise InputError(f"{label} {shown}: must be >= {minimum}")
    if n > maximum:
        raise InputError(f"{label} {shown}: must be <= {maximum}")
    return n


def _number(value: Any, label: str, *, minimum: float, maximum: float,
            open_min: bool = False) -> float:
    shown = _shown_short(value)
    x: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        x = float(value) if abs(value) < 1e300 else math.inf
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        x = float(value)                  # ASCII only: float() also takes '1_0' and '١٢'
    op = ">" if open_min else ">="
    if x is None or not math.isfinite(x):
        raise InputError(f"{label} {shown}: must be a finite number {op} {minimum:g}")
    if x < minimum or (open_min and x == minimum):
        raise InputError(f"{label} {shown}: must be {op} {minimum:g}")
    if x > maximum:
        raise InputError(f"{label} {shown}: must be <= {maximum:g}")
    return x


def _application(value: Any, label: str) -> str:
    if not isinstance(value, str) or not APP_RE.fullmatch(value):
        raise InputError(f"{label} {_shown(value)}: an application name is 1-128 letters, "
                         "digits, '_', '.', '+', '-', starting with a letter or digit")
    return value


def _nonempty(command: tuple[str, ...], image: str, label: str) -> tuple[str, ...]:
    if not image and not command:
        raise InputError(f"{label} '': a job without an image needs a command to run")
    return command


def _command(value: Any, label: str) -> tuple[str, ...]:
    """A list of strings, or one shell-like string split as a POSIX shell would."""
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            items = shlex.split(value)
        except ValueError as e:
            raise InputError(f"{label} {value!r}: cannot split it like a shell ({e})") from None
    elif isinstance(value, list):
        items = value
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise InputError(f"{label}[{i}] {item!r}: must be a string (quote it, so it "
                                 "is passed exactly as written)")
    else:
        raise InputError(f"{label} {_shown(value)}: must be a list of strings or one "
                         "shell-like string")
    if len(items) > jobspec.MAX_COMMAND_ITEMS:
        raise InputError(f"{label}: {len(items)} arguments, at most "
                         f"{jobspec.MAX_COMMAND_ITEMS}")
    size = 0
    for item in items:
        if "\x00" in item:
            raise InputError(f"{label} {_shown_short(item)}: must not contain NUL characters")
        size += _utf8_size(item, label)
    if size > jobspec.MAX_COMMAND_BYTES:
        raise InputError(f"{label}: {size} bytes, at most {jobspec.MAX_COMMAND_BYTES}")
    return tuple(items)


def _utf8_size(text: str, label: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:        # a lone surrogate: bytes that were not UTF-8
        raise InputError(f"{label} {_shown_short(text)}: not UTF-8 text") from None


def _env(value: Any, label: str) -> tuple[tuple[str, str], ...]:
    """``K=V`` strings (command line, or a YAML list) or a YAML mapping."""
    if value is None:
        return ()
    pairs: list[tuple[str, Any]] = []
    if isinstance(value, Mapping):
        pairs = [(k, v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        for item in value:
            if not isinstance(item, str) or "=" not in item:
                raise InputError(f"{label} {_shown(item)}: must be NAME=VALUE")
            k, _, v = item.partition("=")
            pairs.append((k, v))
    else:
        raise InputError(f"{label} {_shown(value)}: must be a mapping or a list of NAME=VALUE")
    seen: dict[str, str] = {}
    for k, v in pairs:
        if not isinstance(k, str) or not ENV_NAME_RE.fullmatch(k):
            raise InputError(f"{label} {_shown(k)}: not a valid variable name (letters, digits, "
                             "'_', not starting with a digit)")
        if k.startswith(RESERVED_ENV_PREFIX) or k in RESERVED_ENV:
            raise InputError(f"{label} {k!r}: set by andreas for every job (the job contract); "
                             "choose another name")
        if not isinstance(v, str):
            raise InputError(f"{label} {k}={v!r}: the value must be a string (quote it, so it "
                             "is passed exactly as written)")
        if "\x00" in v:
            raise InputError(f"{label} {k!r}: the value must not contain NUL characters")
        if k in seen:
            raise InputError(f"{label} {k!r}: given twice")
        seen[k] = v
    if len(seen) > jobspec.MAX_ENV_ITEMS:
        raise InputError(f"{label}: {len(seen)} variables, at most {jobspec.MAX_ENV_ITEMS}")
    size = sum(_utf8_size(k, label) + _utf8_size(v, label) for k, v in seen.items())
    if size > jobspec.MAX_ENV_BYTES:
        raise InputError(f"{label}: {size} bytes, at most {jobspec.MAX_ENV_BYTES}")
    return tuple(seen.items())
