"""The real thing: the agent's delivery writes to MariaDB as the least-privilege agent
account, the server (one of the outage tests' own) is shut down in the middle of the run and
started again, samples keep coming all along, and every one of them reaches the database
exactly once."""

from __future__ import annotations

import secrets
import threading
import time

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from agents.delivery import Delivery
from agents.entries import heartbeat
from agents.spool import Spool
from agents.store_writer import StoreWriter
from andreas.store.registry import agent_engine, register
from andreas.store import accounts, migrate
from andreas.store.engine import make_engine

from ..store.conftest import Backend, admin_engine
from .helpers_agent import NODE, gpu_entry, power_of, spec


def wait_for(cond, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Producer(threading.Thread):
    """Samples at ~250/s (plus a gap, a job-energy row and an epoch now and then), like a
    busy node; ``produced`` counts what was handed to delivery."""

    def __init__(self, delivery: Delivery, job: str) -> None:
        super().__init__(daemon=True)
        self.delivery, self.job = delivery, job
        self.stop_event = threading.Event()
        self.samples = self.gaps = self.energy = self.epochs = 0

    def run(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            self.delivery.put(gpu_entry(i))
            self.samples += 1
            if i % 50 == 0:
                self.delivery.put({"kind": "gap", "uuid": "GPU-t-1", "t": 1.7e9 + i,
                                   "reason": "GPU is lost"})
                self.gaps += 1
            if i % 40 == 0:
                self.delivery.put({"kind": "job_energy", "job_id": self.job, "attempt": 1,
                                   "t": 1.7e9 + i, "interval_s": 40.0, "gpu_energy_mj": i,
                                   "host_energy_mj": 1, "gpu_uuids": ["GPU-t-0"]})
                self.energy += 1
            if i % 100 == 0:
                self.epochs += 1
                self.delivery.put({"kind": "epoch", "job_id": self.job, "attempt": 1,
                                   "epoch": self.epochs, "start_s": float(i),
                                   "end_s": float(i) + 1, "container_id": "c" * 64,
                                   "gpu_uuids": ["GPU-t-0"]})
            if i % 200 == 0:
                self.delivery.put(heartbeat(1.7e9 + i))
            i += 1
            time.sleep(0.004)


def test_mariadb_stopped_mid_run_every_sample_arrives_exactly_once(tmp_path,
                                                                   outage_mariadb):
    server = outage_mariadb.server()
    backend = Backend("mariadb", tmp_path, admin_engine(outage_mariadb.admin_url))
    prefix = f"o{secrets.token_hex(3)}_"
    url = backend.fresh_url()
    admin = make_engine(url)
    try:
        migrate.upgrade(admin)
        accounts.apply(admin, make_url(url).database, {"agent": "agent-pw-1"}, prefix)
        with admin.begin() as conn:                  # the manager registers the node
            node_id = register(conn, spec(), write=True).node_id
            conn.exec_driver_sql(
                "INSERT INTO jobs (id, image, command, env, epochs, epochs_done, submit_s, "
                "due_s, weight, application, grace_s, state) VALUES ('job-o', 'img', '[]', "
                "'{}', 100, 0, 0, 1, 1, 'a', 120, 'running')")
            conn.exec_driver_sql(                    # ... and starts it there
                "INSERT INTO job_attempts (job_id, attempt, node_id, gpu_ids, start_s, "
                "profiling) VALUES ('job-o', 1, %s, '[0]', 0, 0)", (node_id,))
        agent_url = make_url(url).set(username=f"{prefix}agent", password="agent-pw-1")
        writer = StoreWriter(agent_engine(agent_url.render_as_string(hide_password=False)),
                             spec=spec, self_register=False)
        delivery = Delivery(writer, Spool(tmp_path / "spool"), batch_s=0.2, backoff_s=0.2,
                            max_backoff_s=1.0, refused_backoff_s=1.0, shutdown_s=30.0)
        delivery.start()
        producer = Producer(delivery, "job-o")
        producer.start()
        wait_for(lambda: delivery.stats.written > 300, what="direct writes")

        server.stop()                                # the outage
        at_stop = producer.samples
        wait_for(lambda: delivery.stats.mode == "spool", what="spooling")
        wait_for(lambda: producer.samples > at_stop + 500, what="samples during the outage")
        assert delivery.stats.spooled > 0
        server.start()
        at_start = producer.samples
        wait_for(lambda: delivery.stats.mode == "direct", what="replay and direct writes")
        wait_for(lambda: producer.samples > at_start + 300, what="samples after the outage")
        producer.stop_event.set()
        producer.join()
        assert delivery.stop()
        writer.close()

        assert delivery.stats.outages >= 1 and delivery.stats.replayed > 0
        assert delivery.stats.rejected == 0 and delivery.stats.refused == 0
        n = producer.samples
        with admin.connect() as conn:
            count, power, energy = conn.execute(sa.text(
                "SELECT COUNT(*), SUM(power_w), SUM(energy_mj) FROM power_samples")).one()
            aggregated = conn.execute(sa.text("SELECT SUM(samples) FROM power_minutes")).scalar()
            assert (count, aggregated) == (n, n)
            assert float(power) == sum(power_of(i) for i in range(n))        # checksum
            assert int(energy) == sum(int(power_of(i) * 1000) for i in range(n))
            assert conn.execute(sa.text("SELECT COUNT(*) FROM gpu_gaps")).scalar() == \
                producer.gaps
            assert conn.execute(sa.text("SELECT COUNT(*), SUM(gpu_energy_mj) FROM job_energy")
                                ).one() == (producer.energy,
                                            sum(range(0, 40 * producer.energy, 40)))
            assert conn.execute(sa.text("SELECT COUNT(*) FROM epoch_events")).scalar() == \
                producer.epochs
            assert conn.execute(sa.text("SELECT last_heartbeat_s FROM nodes WHERE name = :n"),
                                {"n": NODE}).scalar() is not None
    finally:
        if not server.ping():
            server.start()
        accounts.drop(admin, prefix)
        admin.dispose()
        backend.close()
