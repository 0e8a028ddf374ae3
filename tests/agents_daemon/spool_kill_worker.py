"""A process the spool kill test SIGKILLs at random moments.

It alternates: append ``--chunk`` GPU entries to the spool, flush (fsync), print
``acked <last i>`` (those entries are now durable: the agent would have told nobody else
about them), then replay one chunk of the spool into the SQLite store and commit it in
the spool. ``--start`` is the first entry number (the test restarts it after the last
acknowledged one); ``--drain`` only replays what the spool holds.
"""

from __future__ import annotations

import argparse
import sys

from agents.spool import Spool
from agents.store_writer import StoreWriter
from andreas.store.registry import agent_engine
from tests.agents_daemon.helpers_agent import gpu_entry, spec


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--db")
    p.add_argument("--spool")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--end", type=int, default=0)
    p.add_argument("--chunk", type=int, default=7)
    p.add_argument("--drain", action="store_true")
    a = p.parse_args()
    spool = Spool(a.spool, max_bytes=1 << 24, segment_bytes=2048)
    writer = StoreWriter(agent_engine(a.db), spec=spec, self_register=True)
    i = a.start
    while True:
        if not a.drain and i < a.end:
            n = min(a.chunk, a.end - i)
            spool.append([gpu_entry(k) for k in range(i, i + n)])
            spool.flush()
            i += n
            print(f"acked {i - 1}", flush=True)
        batch = spool.peek(5)
        if batch:
            writer.write([e for _, e in batch])
            spool.commit(batch[-1][0])
        elif a.drain or i >= a.end:
            break
    spool.close()
    writer.close()
    print("done", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
