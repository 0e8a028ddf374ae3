"""End to end: a node cut off from the manager *and* from the store stops its stale job.

Real MariaDB, two real dockerd engines, agents with fake GPUs (each with its own agent
account, so one can be cut off alone), the manager daemon. One long job runs; then its
node is cut off: the manager can no longer reach that engine (the node's Docker endpoint
in the store now names a dead socket, as a network partition would look to the manager)
and its agent can no longer reach the database (its account locked, its connections
killed). The engine itself keeps running, and so would the job without the fence.

Asserted: the job restarts on the other node (attempt 2) from its checkpoint; the copy on
the cut-off node was stopped by its agent's fence (SIGTERM, exit 143, the agent's log says
why) *before* the new copy started (Docker's own timestamps, one clock); the monitor never
saw the job in two containers at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from andreas.store import accounts
from tests.e2e.cluster import IMAGE, Cluster, Monitor, running_cluster
from tests.e2e.test_end_to_end import Store, wait_until

NODES = [("node-a", "1xV100", 1), ("node-b", "1xV100", 1)]
APP = "example-train"
EPOCH_S = 1.0
GRACE_S = 5
MANAGER_FENCE_S = 8.0
AGENT_FENCE_S = 6.0           # at most the manager's: see docs/design/manager.md, "Fencing"
MANAGER_TOML = f"""[manager]
policy = "greedy"
period_s = 600
poll_s = 0.5
restart_overhead_s = 1
fence_after_s = {MANAGER_FENCE_S}
"""
AGENT_TOML = f"fence_check_s = 1.0\nfence_after_s = {AGENT_FENCE_S}\n"
PROFILES = [{"application": APP, "gpu_type": "V100", "gpus": 1, "epoch_time_s": EPOCH_S}]


def _docker_time(text: str) -> float:
    """Docker's RFC 3339 time with nanoseconds -> UNIX seconds."""
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + float("0." + (frac or "0"))


def _admin_sql(cluster: Cluster, *statements: str) -> list[tuple]:
    """Statements as the administrator, through the driver's cursor (no parameter
    formatting, so a '%' host needs no escaping); the last one's rows."""
    admin = sa.create_engine(cluster.admin_url)
    try:
        with admin.begin() as conn:
            cursor = conn.connection.dbapi_connection.cursor()
            try:
                for statement in statements:
                    cursor.execute(statement)
                return list(cursor.fetchall())
            finally:
                cursor.close()
    finally:
        admin.dispose()


def _kill(cluster: Cluster, connection_id: int) -> None:
    """KILL CONNECTION, where the connection may have ended since the processlist showed
    it (the agent's connections are short): MariaDB's 1094, "Unknown thread id", is fine."""
    try:
        _admin_sql(cluster, f"KILL CONNECTION {connection_id}")
    except Exception as e:   # the driver's own error; 1094 only, the rest is raised again
        if not e.args or e.args[0] != 1094:
            raise


def _own_agent_accounts(cluster: Cluster) -> dict[str, str]:
    """One agent account per node (the agent role's grants), each agent restarted with
    its own; returns node -> account name."""
    url = make_url(cluster.agent_env["ANDREAS_DB_URL"])
    database = make_url(cluster.db_url_admin).database
    users = {name: f"{url.username}{i}" for i, name in enumerate(cluster.nodes)}
    for user in users.values():
        _admin_sql(cluster, f"CREATE USER '{user}'@'%' IDENTIFIED BY '{url.password}'",
                   *accounts.grants(database, accounts.Account("agent", user, "%")))

    def drop() -> None:
        _admin_sql(cluster, *(f"DROP USER IF EXISTS '{u}'@'%'" for u in users.values()))
    cluster.cleanup.append(drop)
    for name, node in cluster.nodes.items():
        assert node.agent is not None
        cluster.stop_agent(name)
        cluster.start_agent(name, {**cluster.agent_env, "ANDREAS_DB_URL": url.set(
            username=users[name]).render_as_string(hide_password=False)})
    return users


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("e2e-fence"), NODES,
                         manager_toml=MANAGER_TOML, app_profiles=PROFILES,
                         agent_toml=AGENT_TOML) as c:
        yield c


def _containers(cluster: Cluster, node: str, job: str) -> list[dict]:
    client = cluster.nodes[node].engine.client()
    try:
        return [client.api.inspect_container(c["Id"]) for c in client.api.containers(
            all=True, filters={"label": f"andreas.job={job}"})]
    finally:
        client.close()


def test_cut_off_node_stops_its_copy_before_the_job_restarts_elsewhere(cluster: Cluster):
    users = _own_agent_accounts(cluster)
    db = Store(cluster)
    monitor = Monitor(cluster)
    cluster.monitor = monitor
    monitor.start()
    cluster.start_manager()
    job = cluster.andreas("submit", IMAGE, "--name", "long", "--epochs", "300", "--due",
                          "+2h", "--weight", "0.01", "--app", APP, "--max-gpus", "1",
                          "--grace-s", str(GRACE_S),
                          "--env", f"EXAMPLE_EPOCH_S={EPOCH_S}", "--quiet").strip()
    wait_until(cluster, "the job running with a few epochs",
               lambda: any(db.running_on(n) == [job] for n in cluster.nodes)
               and db.epochs_done(job) >= 3)
    cut = next(n for n in cluster.nodes if db.running_on(n) == [job])
    other = next(n for n in cluster.nodes if n != cut)
    (first,) = _containers(cluster, cut, job)
    assert first["State"]["Running"]

    # --- cut the node off: the manager loses its engine, its agent the database ---------
    database = make_url(cluster.db_url_admin).database
    _admin_sql(cluster, f"UPDATE `{database}`.nodes SET docker_endpoint = "
                        f"'unix:///nonexistent/andreas-e2e/docker.sock' WHERE name = '{cut}'",
               f"ALTER USER '{users[cut]}'@'%' ACCOUNT LOCK")
    # the cut: from here the agent's next connection fails, and its open ones end below
    # (each admin call opens a connection of its own: under load the kills can outlast
    # the agent's fence, so timing the cut after them put it after the fence)
    cut_at = time.time()
    for (pid,) in _admin_sql(cluster, "SELECT id FROM information_schema.processlist "
                                      f"WHERE user = '{users[cut]}'"):
        _kill(cluster, int(pid))

    wait_until(cluster, f"the job restarted on {other}",
               lambda: db.running_on(other) == [job], timeout_s=120)
    stale = cluster.nodes[cut].engine.client().api.inspect_container(first["Id"])["State"]
    (second,) = _containers(cluster, other, job)
    monitor.stop()
    agent_log = (cluster.tmp / f"agent-{cut}.log").read_text()

    # The stale copy was stopped by the fence (SIGTERM -> checkpoint -> 143), on its own
    # node's engine, which the manager never reached again.
    assert not stale["Running"] and stale["ExitCode"] == 143, stale
    assert "fence: no answer from the store" in agent_log, agent_log[-3000:]
    assert "fence: SIGTERM container" in agent_log
    stopped_at = _docker_time(stale["FinishedAt"])
    started_at = _docker_time(second["State"]["StartedAt"])
    assert cut_at < stopped_at < started_at, (cut_at, stopped_at, started_at)
    # the fence acted after fence_after_s without the store, not before
    assert stopped_at - cut_at >= AGENT_FENCE_S - 1.5
    # the manager's hold: grace + fence_after_s + 5 s after it gave the node up
    assert started_at - cut_at >= GRACE_S + MANAGER_FENCE_S
    assert monitor.duplicates == [] and monitor.polls > 10
    rows = db.rows("SELECT attempt, reason, end_s FROM job_attempts WHERE job_id = :j "
                   "ORDER BY attempt", j=job)
    assert [r.attempt for r in rows] == [1, 2] and rows[0].reason == "node unreachable"
    assert rows[1].end_s is None
    # resumed from the checkpoint: the new copy's epochs go on from the old copy's
    assert db.epochs_done(job) >= 3
    cluster.stop_manager()
