"""agents/tracker.py when the engine crashes under a running container (dockerd killed;
the container's process runs on under its shim): the run is kept, and once the engine
answers again the epochs the container logged meanwhile are read and its exit reported.
Against the scripted Docker of tests/agents/test_tracker.py."""

from __future__ import annotations

import time

from andreas.job import container_labels
from tests.agents.test_tracker import Collect, FakeDocker, progress, wait_for


class Crashing(FakeDocker):
    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def events(self, **kw):
        if self.down:
            raise ConnectionError("connection refused")
        return super().events(**kw)

    def crash(self) -> None:
        self.down = True
        for s in self.event_streams:
            s.q.put(OSError("connection reset"))
        for c in self.containers.by_id.values():
            for s in c.streams:
                s.q.put(OSError("connection reset"))
            c.streams = []

    def watch(self, c) -> None:
        """The container's calls fail while the engine is down."""
        reload, logs = c.reload, c.logs

        def down_reload():
            if self.down:
                raise ConnectionError("connection refused")
            reload()

        def down_logs(**kw):
            if self.down:
                raise ConnectionError("connection refused")
            return logs(**kw)
        c.reload, c.logs = down_reload, down_logs


def test_a_crashed_engine_keeps_the_run_and_its_epochs_are_read_when_it_is_back():
    d, got = Crashing(), Collect()
    tracker = got.tracker(d, reconnect_s=0.05, max_reconnect_s=0.1).start()
    try:
        assert tracker.wait_connected(5)
        c = d.run(container_labels("j7", 1))
        d.watch(c)
        wait_for(lambda: c.streams)
        t0 = time.time()
        progress(c, "j7", range(1, 2), t0)
        wait_for(lambda: len(got.records) == 1)
        d.crash()
        time.sleep(0.5)
        assert [i.job_id for i in tracker.followed()] == ["j7"]    # still the job's GPUs
        assert got.exits == []
        progress(c, "j7", range(2, 4), t0)          # written while nobody could read it
        c.running, c.exit_code, c.finished = False, 143, time.time()   # then stopped
        d.down = False                              # the engine is back
        wait_for(lambda: len(got.exits) == 1)
        assert sorted(r.epoch for r in got.records) == [1, 2, 3]
        assert got.exits[0].exit_code == 143 and got.exits[0].job_id == "j7"
    finally:
        tracker.stop()
