"""The manager daemon on a database with an in-memory engine, for the signal tests:
``python -m tests.manager.daemon_worker URL``."""

from __future__ import annotations

import logging
import sys

from andreas.manager.daemon import run
from tests.manager.fakes import FakeExecutor
from tests.manager.helpers import settings


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    cfg = settings(poll_s=0.05, period_s=0.2, lock="exit")
    cfg = type(cfg)(**{**cfg.__dict__, "db_url": sys.argv[1]})
    sys.exit(run(cfg, executor=FakeExecutor()))


if __name__ == "__main__":
    main()
