"""Holds the manager lock of a database until killed:
``python -m tests.manager.lock_worker URL``."""

from __future__ import annotations

import sys
import time

from andreas.manager.lock import acquire, make_lock
from andreas.store.engine import make_engine


def main() -> None:
    engine = make_engine(sys.argv[1])
    lock = make_lock(engine)
    assert acquire(lock, "exit")
    print("locked", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
