"""SIGTERM (the manager's preemption) as a flag the training loop checks."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

from .names import EXIT_PREEMPTED


class GracefulStop:
    """Turns SIGTERM (the manager's preemption) into a flag.

    ``install()`` (main thread only) replaces the handlers of ``signals``; the training
    loop checks ``requested`` after each epoch (or batch), saves a checkpoint and calls
    ``exit_if_requested()``, which raises ``SystemExit(143)``. ``uninstall()`` (or
    leaving the ``with`` block) restores the previous handlers.
    """

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,), *,
                 announce: bool = True) -> None:
        self.signals = tuple(signals)
        self.announce = announce
        self.signum: int | None = None
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def install(self) -> GracefulStop:
        for s in self.signals:
            if s not in self._previous:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def uninstall(self) -> None:
        while self._previous:
            s, handler = self._previous.popitem()
            signal.signal(s, handler)

    def __enter__(self) -> GracefulStop:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def _handle(self, signum: int, frame: object) -> None:
        self.request(signum)

    def request(self, signum: int = signal.SIGTERM) -> None:
        """Set the flag as the signal would (also for tests and programmatic stops)."""
        first = not self._event.is_set()
        self.signum = signum
        self._event.set()
        if first and self.announce:
            with contextlib.suppress(OSError):
                os.write(2, f"andreas: signal {signum} received: finishing this epoch, "
                            f"checkpointing, exiting with {EXIT_PREEMPTED}\n".encode())

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def exit_if_requested(self, code: int = EXIT_PREEMPTED) -> None:
        if self.requested:
            raise SystemExit(code)

