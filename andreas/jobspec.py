"""The rules of a job submission, in one place.

Two checkers are built from these constants and must agree exactly: the CLI's
(:mod:`andreas.service.submit`, friendly messages) and the database's ``andreas_submit``
procedure (:mod:`andreas.store.procedures`), the boundary for a MariaDB user who calls
it directly. The patterns are written in the subset that Python's ``re`` and MariaDB's
PCRE read the same way (no ``\\w``, no ``$``: Python checks with ``fullmatch``, SQL
anchors with ``\\z``, since ``$`` also matches before a final newline).

Changing a rule here changes both checkers; the database's copy follows with a migration
that recreates the procedure (``procedures.recreate``).
"""

from __future__ import annotations

import fnmatch

# the bounds both checkers read (owned by andreas/limits.py)
from andreas.limits import (MAX_EPOCHS, MAX_GPUS_PER_JOB, MAX_GRACE_S,  # noqa: F401
                            MAX_IMAGE_CHARS, MAX_WEIGHT)

# Ids become container names (andreas-<id>-<attempt>) and checkpoint directories.
JOB_ID = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
APPLICATION = r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}"
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,255}"
# Set by the manager for every container (the job contract); a user value would lie to
# the job or, for NVIDIA_VISIBLE_DEVICES, hand it GPUs that other jobs hold.
RESERVED_ENV_PREFIX = "ANDREAS_"
RESERVED_ENV = ("NVIDIA_VISIBLE_DEVICES",)

# Docker image references (distribution/reference grammar, sha256 digests only). The
# first component is a registry host when more follow and it holds '.', ':' or an upper
# case letter or is ``localhost`` (Docker's own split); the repository path (after the
# host) is at most 255 characters, the whole reference at most MAX_IMAGE_CHARS.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?"
TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
DIGEST = r"sha256:[0-9a-f]{64}"
IMAGE = (rf"(?:(?=[^/]*[.:A-Z]|localhost/){DOMAIN}/|(?![^/]*[.:A-Z][^/]*/)(?!localhost/))"
         rf"(?=[a-z0-9._/-]{{1,255}}(?![a-z0-9._/-])){_COMPONENT}(?:/{_COMPONENT})*"
         rf"(?::{TAG})?(?:@{DIGEST})?")
# A job names the image it runs, or none with a command (run by the Slurm executor):
# the database's andreas_submit admits '' exactly with a non-empty command list.

# Numbers: past these a value is a typo that would plan a job first for ever (epochs),
# turn the objective into NaN (weight), make a job impossible to stop (grace) or
# overflow a column.
MAX_GPUS = MAX_GPUS_PER_JOB
MAX_GPU_MILLI = 999                     # a share of one GPU, 1-999 milli-GPU
MAX_GPU_MEMORY_MIB = 1 << 20            # 1 TiB: far above any GPU's memory
MAX_DUE_AHEAD_S = 10 * 365 * 86400.0    # due in the future, at most 10 years ahead

# Command and environment: sizes are UTF-8 bytes of the values (names included for the
# environment), so both checkers count the same thing whatever the JSON escaping; no
# value holds NUL (the kernel cuts an argv or environment string there).
MAX_COMMAND_ITEMS = 4096
MAX_COMMAND_BYTES = 256 << 10
MAX_ENV_ITEMS = 1024
MAX_ENV_BYTES = 256 << 10
# The JSON text the database is handed: refused unread above this (every valid value
# fits: six bytes per escaped character at most).
MAX_JSON_TEXT_BYTES = 8 * max(MAX_COMMAND_BYTES, MAX_ENV_BYTES) + 64 * MAX_COMMAND_ITEMS


def image_allowed(image: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``[executor] image_allowlist`` admits ``image``; empty: any image. Checked
    at submission (``andreas submit``) and again at start (the executor).

    fnmatch (case-sensitive) component by component, so a ``*`` never crosses a ``/``:
    ``img:*`` cannot match ``img:5000/evil/x`` (a registry host) and ``reg.io/ml/*`` does
    not admit ``reg.io/ml/other/x``. Wildcards in the registry host are refused when the
    config is loaded (:func:`andreas.config.check_image_pattern`)."""
    if not patterns:
        return True
    parts = image.split("/")
    return any(len(p.split("/")) == len(parts)
               and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, p.split("/")))
               for p in patterns)
