"""A submission (and a cancellation) wakes the manager instead of waiting for its poll:
``andreas.infra.nudge``, on SQLite and MariaDB. The poll stays the source of truth, so
the manager here polls every 30 s and the job must still start long before that."""

from __future__ import annotations

import threading
import time

from andreas.infra import nudge
from andreas.manager.daemon import run
from andreas.service.submit import cancel, parse_submission, submit
from andreas.store import JobState
from tests.manager.fakes import FakeExecutor
from tests.manager.helpers import add_node, settings, state_of
from tests.manager.test_daemon import decisions, wait_for

POLL_S = 30.0          # far longer than any wait below: only a wake can make them pass


def test_a_poke_reaches_the_listener_of_its_database_only():
    got: list[str] = []
    listener = nudge.listen("sqlite:/tmp/a.db", got.append)
    assert listener is not None
    try:
        assert nudge.poke("sqlite:/tmp/a.db") and nudge.poke("sqlite:/tmp/a.db", b"cancel")
        assert not nudge.poke("sqlite:/tmp/b.db")          # nobody listens for that one
        assert wait_for(lambda: got == ["submit", "cancel"], timeout_s=10)
        assert nudge.listen("sqlite:/tmp/a.db", got.append) is None   # taken: poll only
    finally:
        listener.close()
    assert not nudge.poke("sqlite:/tmp/a.db")


def test_a_submission_and_a_cancellation_wake_the_manager(mstore, db_url):
    add_node(mstore, "a", gpus=2)
    base = settings(poll_s=POLL_S)
    cfg = type(base)(**{**base.__dict__, "db_url": db_url})
    ex = FakeExecutor()
    stop = threading.Event()
    daemon = threading.Thread(target=run, args=(cfg,), kwargs=dict(
        store=mstore, executor=ex, stop=stop, install_signals=False))
    daemon.start()
    try:
        assert wait_for(lambda: decisions(mstore) != [])          # started, first tick done
        time.sleep(0.5)                                        # and waiting for its poll
        now = time.time()
        job = parse_submission(image="registry.example/train:1", epochs="3", due="+1h",
                               weight="0.01", app="resnet50", name="woken", now_s=now)
        t0 = time.monotonic()
        submit(mstore, job, now)
        assert wait_for(lambda: state_of(mstore, "woken") is JobState.RUNNING,
                        timeout_s=POLL_S / 3)
        assert time.monotonic() - t0 < POLL_S / 3
        cancel(mstore, "woken", reason="test", now_s=time.time())
        assert wait_for(lambda: not ex.find("woken").running, timeout_s=POLL_S / 3)
    finally:
        stop.set()
        daemon.join(30)
    assert not daemon.is_alive()
