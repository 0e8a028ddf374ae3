"""One exception hierarchy for andreas; the CLI turns these into one-line messages."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def one_line(text: str) -> str:
    """Messages may come from any layer (a database driver, Docker, a file); a command
    promises exactly one line: the non-empty lines joined with `` | ``."""
    return " | ".join(part.strip() for part in text.splitlines() if part.strip())


def error_line(e: BaseException, limit: int = 400) -> str:
    """An exception as one short line: the Docker SDK's ``explanation`` when it has one,
    else its message, else its type."""
    text = " ".join(str(getattr(e, "explanation", None) or e).split())
    return (text or type(e).__name__)[:limit]


class AndreasError(Exception):
    """Base of every error andreas raises on purpose."""


class InputError(AndreasError, ValueError):
    """Bad user input: the message names the object, the field and the value.

    ``field``: the input field the message starts with (``node 'gpu9': no such node``).
    Library code names fields, because a value may come from a file, the environment or
    an option; a command whose user typed an option renames it (:meth:`named`).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def named(self, name: str) -> InputError:
        """The same error with its leading field called ``name`` (e.g. ``--node``)."""
        message = str(self)
        if self.field is not None and message.startswith(self.field):
            message = name + message[len(self.field):]
        return InputError(message, field=name)


@contextmanager
def options(**names: str) -> Iterator[None]:
    """``with options(node="--node"): run(...)``: an InputError about field ``node`` is
    reported as one about ``--node``, the option the command's user typed."""
    try:
        yield
    except InputError as e:
        if e.field in names:
            raise e.named(names[e.field]) from None
        raise


class NotPermitted(AndreasError):
    """The caller may not do this to that job: it is neither its owner nor an operator. The
    message names the job, its owner and the caller."""


class InfeasiblePlan(AndreasError):
    """A plan that breaks a hard constraint (capacity, one node per job, unknown names)."""
