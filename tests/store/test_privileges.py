"""Least-privilege accounts, proved against the real MariaDB server (MariaDB only: SQLite
has no accounts)."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from andreas.cli import main
from andreas.store import (GapRow, HostRow, JobEnergyRow, JobState, PowerRow, downsample,
                           insert_epoch_events, insert_gpu_gaps, insert_host_samples,
                           insert_job_energy, insert_power_samples, mean_node_power, migrate,
                           open_store, transition)
from andreas.store import accounts
from andreas.store.engine import error_code, make_engine
from andreas.store.models import NodeState
from andreas.store.nodes import move_if, touch_heartbeat
from andreas.store.samples import AgentGapRow, insert_agent_gaps

from .conftest import Backend, admin_engine
from .helpers import add_job, add_node

ROOT = Path(__file__).resolve().parents[2]
DENIED = {1044, 1142, 1143, 1227, 1045}


@pytest.fixture(scope="module")
def mdb(tmp_path_factory) -> Iterator[dict]:
    backend = Backend("mariadb", tmp_path_factory.mktemp("priv"), admin_engine())
    prefix = f"t{secrets.token_hex(3)}_"
    passwords = {role: secrets.token_urlsafe(12) for role in accounts.ROLES}
    admin_url = backend.fresh_url()
    engine = make_engine(admin_url)
    try:
        migrate.upgrade(engine)
        accounts.apply(engine, make_url(admin_url).database, passwords, prefix)
        urls = {role: make_url(admin_url).set(username=f"{prefix}{role}", password=pw)
                .render_as_string(hide_password=False) for role, pw in passwords.items()}
        yield {"admin": admin_url, "prefix": prefix, "passwords": passwords, **urls,
               "backend": backend, "engine": engine}
    finally:
        for p in {prefix, f"{prefix}s_", f"{prefix}c_"}:
            accounts.drop(engine, p)
        engine.dispose()
        backend.close()


@pytest.fixture(scope="module")
def stores(mdb) -> Iterator[dict]:
    out = {role: open_store(mdb[role]) for role in accounts.ROLES}
    out["admin"] = open_store(mdb["admin"])
    try:
        yield out
    finally:
        for s in out.values():
            s.dispose()


def denied(store, sql: str, params: dict | None = None) -> int:
    with pytest.raises(sa.exc.DBAPIError) as err, store.session() as s:
        s.execute(sa.text(sql), params or {})
    code = error_code(err.value)
    assert code in DENIED, f"{sql}: expected a privilege error, got {err.value.orig}"
    return code


def test_every_account_passes_the_schema_check(stores):
    for role in accounts.ROLES:
        assert stores[role].url.count("***") == 1


def test_agent_inserts_samples_and_heartbeats_its_node(stores):
    name, node_id, gpu_ids = add_node(stores["admin"], gpus=2)
    job = add_job(stores["admin"])
    add_attempt(stores["admin"], job, node_id)       # the agent writes for attempts there
    agent = stores["agent"]
    with agent.session() as s:
        assert insert_power_samples(s, [PowerRow(g, 1e6 + k, node_id, 1, 150.0, 10)
                                        for k in range(5) for g in gpu_ids]) == 10
        assert insert_host_samples(s, [HostRow(node_id, 1e6, 1, 12.5, 2048, 90.0)]) == 1
        insert_epoch_events(s, [dict(job_id=job, attempt=1, epoch=1, start_s=1.0, end_s=2.0,
                                     node_id=node_id, gpu_type="V100", gpus=1)])
        touch_heartbeat(s, node_id, 1e6 + 5)                # what the agent writes
        assert move_if(s, node_id, NodeState.DOWN, NodeState.UP)  # its start
    with agent.session() as s:   # a replayed spool: it may see which samples are stored
        assert insert_power_samples(s, [PowerRow(g, 1e6 + k, node_id, 1, 150.0, 10)
                                        for k in range(7) for g in gpu_ids],
                                    skip_duplicates=True) == 4
    with stores["admin"].session() as s:
        assert mean_node_power(s, name, 1, 0, 2e6).samples == 14
    gap = GapRow(gpu_ids[0], 1e6 + 9, "GPU is lost")
    energy = JobEnergyRow(job, 1, 1e6 + 60, node_id, 60.0, 1, 9_000_000, 1_000_000)
    epoch = dict(job_id=job, attempt=1, epoch=1, start_s=1.0, end_s=2.0, node_id=node_id,
                 gpu_type="V100", gpus=1)
    for _ in range(2):   # a replayed spool: INSERT IGNORE needs no read-back
        with agent.session() as s:
            insert_gpu_gaps(s, [gap], skip_duplicates=True)
            insert_job_energy(s, [energy], skip_duplicates=True)
            insert_epoch_events(s, [epoch], skip_duplicates=True)
    with stores["admin"].session() as s:
        assert s.execute(sa.text("SELECT COUNT(*) FROM gpu_gaps WHERE gpu_id = :g"),
                         {"g": gpu_ids[0]}).scalar() == 1
        assert s.execute(sa.text("SELECT COUNT(*) FROM job_energy WHERE job_id = :j"),
                         {"j": job}).scalar() == 1


def add_attempt(store, job: str, node_id: int, attempt: int = 1) -> None:
    with store.session() as s:
        s.execute(sa.text("INSERT INTO job_attempts (job_id, attempt, node_id, gpu_ids, "
                          "start_s, profiling) VALUES (:j, :a, :n, '[0]', 1, 0)"),
                  {"j": job, "a": attempt, "n": node_id})


def test_agent_cannot_touch_jobs_or_read_what_it_does_not_need(stores):
    name, node_id, gpu_ids = add_node(stores["admin"], gpus=1)
    job = add_job(stores["admin"])
    agent = stores["agent"]
    denied(agent, "SELECT * FROM jobs")
    denied(agent, "UPDATE jobs SET state = 'running' WHERE id = :j", {"j": job})
    denied(agent, "INSERT INTO jobs (id, image, command, env, epochs, epochs_done, submit_s, "
                  "due_s, weight, application, grace_s, state) VALUES ('x', 'i', '[]', '{}', "
                  "1, 0, 0, 1, 1, 'a', 1, 'queued')")
    denied(agent, "DELETE FROM jobs")
    with pytest.raises(sa.exc.DBAPIError) as err, agent.session() as s:
        transition(s, job, JobState.RUNNING)
    assert error_code(err.value) == 1142
    for table in ("job_attempts", "decisions", "app_profiles", "power_samples", "host_samples",
                  "epoch_events", "power_minutes", "host_minutes", "gpu_gaps", "job_energy"):
        denied(agent, f"SELECT * FROM {table}")
    denied(agent, "SELECT power_w FROM power_samples")
    denied(agent, "SELECT container_id, log_tail FROM job_attempts")
    denied(agent, "UPDATE job_attempts SET end_s = 1")
    denied(agent, "DELETE FROM job_attempts")
    denied(agent, "SELECT host_power_w FROM host_samples")
    denied(agent, "UPDATE power_minutes SET energy_mj = 0")
    denied(agent, "DELETE FROM power_minutes")
    denied(agent, "DELETE FROM power_samples")
    denied(agent, "UPDATE power_samples SET power_w = 0")
    denied(agent, "UPDATE nodes SET name = 'evil' WHERE id = :n", {"n": node_id})
    denied(agent, "UPDATE nodes SET docker_endpoint = 'tcp://evil' WHERE id = :n", {"n": node_id})
    denied(agent, "UPDATE gpus SET power_limit_w = 1")
    denied(agent, "UPDATE gpus SET healthy = 0")
    denied(agent, "DELETE FROM gpu_gaps")
    denied(agent, "UPDATE job_energy SET gpu_energy_mj = 0")
    denied(agent, "DELETE FROM nodes")
    denied(agent, "DROP TABLE power_samples")
    denied(agent, "CREATE TABLE x (a INT)")
    denied(agent, "TRUNCATE TABLE power_samples")
    with stores["admin"].session() as s:
        from andreas.store import Job
        assert s.get(Job, job).state is JobState.QUEUED


def test_agent_reads_the_fence_columns_of_attempts(stores):
    """The fence's read (store/fence.py) works through the agent's column grant."""
    from andreas.store.attempts import end_attempt, open_attempt
    from andreas.store.fence import verdicts

    name, node_id, _ = add_node(stores["admin"], gpus=1)
    job = add_job(stores["admin"])
    with stores["admin"].session() as s:
        first = open_attempt(s, job_id=job, attempt=1, node_id=node_id, gpu_ids=[0],
                             decision_id=None)
    with stores["agent"].session() as s:
        assert verdicts(s, name, [(job, 1)])[job, 1].stale is False
    with stores["admin"].session() as s:
        end_attempt(s, first, 5.0, exit_code=None, reason="node unreachable")
    with stores["agent"].session() as s:
        found = verdicts(s, name, [(job, 1)])[job, 1]
    assert found.stale and found.why == "attempt ended in the store"


def test_reporter_reads_everything_and_writes_nothing(stores):
    _, node_id, gpu_ids = add_node(stores["admin"], gpus=1)
    job = add_job(stores["admin"])
    reporter = stores["reporter"]
    with reporter.session() as s:
        for table in accounts.data_tables():
            s.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar()
    denied(reporter, "UPDATE jobs SET weight = 2 WHERE id = :j", {"j": job})
    denied(reporter, "DELETE FROM jobs WHERE id = :j", {"j": job})
    denied(reporter, "INSERT INTO power_samples (gpu_id, t, node_id, busy_gpus, power_w) "
                     "VALUES (:g, 1, :n, 0, 1)", {"g": gpu_ids[0], "n": node_id})
    denied(reporter, "UPDATE alembic_version SET version_num = 'x'")
    denied(reporter, "DROP TABLE decisions")


def test_manager_has_all_data_access_and_no_ddl(stores):
    name, node_id, gpu_ids = add_node(stores["manager"], gpus=2)   # manager registers nodes
    job = add_job(stores["manager"])
    manager = stores["manager"]
    with manager.session() as s:
        transition(s, job, JobState.RUNNING, expected=JobState.QUEUED)
        insert_power_samples(s, [PowerRow(gpu_ids[0], 1.0, node_id, 1, 100.0, 5)])
    downsample(manager, keep_days=1, now_s=10 * 86400.0)       # DELETE + INSERT ... SELECT
    with manager.session() as s:
        s.execute(sa.text("DELETE FROM decisions"))
    for sql in ("CREATE TABLE x (a INT)", "ALTER TABLE jobs ADD COLUMN x INT",
                "DROP TABLE decisions", "CREATE INDEX ix_x ON jobs (weight)",
                "TRUNCATE TABLE decisions", "UPDATE alembic_version SET version_num = 'x'",
                f"GRANT SELECT ON jobs TO '{stores['manager'].engine.url.username}'@'%'"):
        denied(manager, sql)


def test_migrator_owns_the_ddl(stores, mdb):
    migrator = stores["migrator"]
    with migrator.session() as s:
        s.execute(sa.text("CREATE TABLE scratch (a INT)"))
        s.execute(sa.text("ALTER TABLE scratch ADD COLUMN b INT"))
        s.execute(sa.text("DROP TABLE scratch"))
    engine = make_engine(mdb["migrator"])
    try:
        head = migrate.head_revision()
        assert migrate.upgrade(engine) == (head, head)
    finally:
        engine.dispose()
    denied(migrator, f"GRANT SELECT ON jobs TO '{mdb['prefix']}agent'@'%'")
    denied(migrator, "SELECT * FROM mysql.global_priv")


def test_migrator_can_create_the_schema_in_an_empty_database(mdb):
    backend, engine = mdb["backend"], mdb["engine"]
    url = make_url(backend.fresh_url())
    prefix = f"{mdb['prefix']}c_"
    accounts.apply(engine, url.database, {"migrator": "pw-migrator-1"}, prefix)
    migrator = make_engine(url.set(username=f"{prefix}migrator", password="pw-migrator-1"))
    try:
        assert migrate.upgrade(migrator) == (None, migrate.head_revision())
    finally:
        migrator.dispose()


def grants_of(engine: sa.Engine, user: str) -> set[str]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(f"SHOW GRANTS FOR '{user}'@'%%'").scalars().all()
    return {r.replace(user, "USER") for r in rows if not r.startswith("GRANT USAGE")}


def client() -> str:
    found = shutil.which("mariadb") or shutil.which("mysql")
    if not found:
        pytest.fail("the mariadb client is missing: run `bash scripts/test.sh` (it installs "
                    "mariadb-server, which brings the client)", pytrace=False)
    return found


def run_script(mdb, tmp_path: Path, script: str, passwords: dict[str, str] | None):
    url = make_url(mdb["admin"])
    cnf = tmp_path / "admin.cnf"
    cnf.write_text(f"[client]\nuser={url.username}\npassword={url.password}\n"
                   f"host={url.host}\nport={url.port}\n")
    cnf.chmod(0o600)
    sets = "".join(f"SET @{role}_password = '{pw}';\n" for role, pw in (passwords or {}).items())
    return subprocess.run([client(), f"--defaults-extra-file={cnf}", url.database],
                          input=sets + script, capture_output=True, text=True, timeout=60)


def test_the_sql_script_is_the_generated_one():
    assert (ROOT / "scripts" / "mariadb-setup.sql").read_text() == accounts.setup_script()
    result = CliRunner().invoke(main, ["db", "create-users"], env={
        "ANDREAS_DB_URL": "mysql+pymysql://root@db.example/andreas", "ANDREAS_CONFIG": None})
    assert result.exit_code == 0
    assert result.output == accounts.setup_script()


def test_the_sql_script_grants_what_create_users_grants(mdb, tmp_path):
    database = make_url(mdb["admin"]).database
    prefix = f"{mdb['prefix']}s_"
    script = accounts.setup_script(database, prefix)
    refused = run_script(mdb, tmp_path, script, None)
    assert refused.returncode != 0 and "set @agent_password" in refused.stderr
    done = run_script(mdb, tmp_path, script, {r: f"pw-{r}-x" for r in accounts.ROLES})
    assert done.returncode == 0, done.stderr
    done = run_script(mdb, tmp_path, script, {r: f"pw-{r}-x" for r in accounts.ROLES})
    assert done.returncode == 0, done.stderr       # idempotent
    engine = mdb["engine"]
    for role in accounts.ROLES:
        assert grants_of(engine, f"{prefix}{role}") == grants_of(engine, f"{mdb['prefix']}{role}")
    agent = make_engine(make_url(mdb["admin"]).set(username=f"{prefix}agent",
                                                   password="pw-agent-x"))
    try:
        with agent.connect() as conn:
            conn.exec_driver_sql("SELECT COUNT(*) FROM gpus")
    finally:
        agent.dispose()


def test_cli_create_users_takes_passwords_from_files_only(mdb, tmp_path):
    env = {"ANDREAS_DB_URL": mdb["admin"], "ANDREAS_CONFIG": None}
    for role in accounts.ROLES:
        env[f"ANDREAS_DB_{role.upper()}_PASSWORD"] = None
        env[f"ANDREAS_DB_{role.upper()}_PASSWORD_FILE"] = None
    prefix = f"{mdb['prefix']}c_"
    missing = CliRunner().invoke(main, ["db", "create-users", "--apply", "--prefix", prefix],
                                 env=env)
    assert missing.exit_code == 2
    assert "ANDREAS_DB_AGENT_PASSWORD or ANDREAS_DB_AGENT_PASSWORD_FILE" in missing.output
    secret = "s3cr3t-" + secrets.token_hex(4)
    for role in accounts.ROLES:
        f = tmp_path / role
        f.write_text(f"{secret}-{role}\n")
        env[f"ANDREAS_DB_{role.upper()}_PASSWORD_FILE"] = str(f)
    result = CliRunner().invoke(main, ["db", "create-users", "--apply", "--prefix", prefix],
                                env=env)
    assert result.exit_code == 0, result.output
    assert f"account '{prefix}agent'@'%': agent privileges" in result.output
    assert secret not in result.output
    admin_password = make_url(mdb["admin"]).password
    assert admin_password not in result.output
    agent = make_engine(make_url(mdb["admin"]).set(username=f"{prefix}agent",
                                                   password=f"{secret}-agent"))
    try:
        with agent.connect() as conn:      # the file's trailing newline is not the password
            conn.exec_driver_sql("SELECT COUNT(*) FROM nodes")
    finally:
        agent.dispose()


def test_cli_create_users_needs_the_schema(mdb):
    url = mdb["backend"].fresh_url()
    env = {"ANDREAS_DB_URL": url, "ANDREAS_CONFIG": None,
           **{f"ANDREAS_DB_{r.upper()}_PASSWORD": "x" for r in accounts.ROLES}}
    result = CliRunner().invoke(main, ["db", "create-users", "--apply"], env=env)
    assert result.exit_code == 2
    assert "not migrated" in result.output and "andreas db upgrade" in result.output



def test_register_with_the_agents_account_says_which_account_may(mdb, tmp_path):
    """`andreas-agent --register` with the agent's own account is refused by the server;
    the line says to use the manager's account instead (issue 34)."""
    from click.testing import CliRunner

    from agents.cli import main as agent_main

    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\nnode_name = "reg-node"\ndocker_url = ""\n'
                   f'[spool]\npath = "{tmp_path / "spool"}"\n')
    result = CliRunner().invoke(agent_main, ["--config", str(cfg), "--fake-gpus", "1xT4",
                                             "--register"],
                                env={"ANDREAS_DB_URL": mdb["agent"]})
    assert result.exit_code == 1
    assert "command denied" in result.output
    assert "run --register once with the manager's account" in result.output
    assert mdb["passwords"]["agent"] not in result.output


# ------------------------------------------------------------------ issue 32, point 8
def refused_by_trigger(store, write) -> str:
    """``write(session)`` is refused by the database itself (a trigger's SIGNAL)."""
    with pytest.raises(sa.exc.DBAPIError) as err, store.session() as s:
        write(s)
    assert error_code(err.value) == 1644, err.value
    return str(err.value.orig)


def epoch(job: str, node_id: int, attempt: int = 1) -> dict:
    return dict(job_id=job, attempt=attempt, epoch=1, start_s=1.0, end_s=2.0,
                node_id=node_id, gpu_type="V100", gpus=1)


@pytest.fixture(scope="module")
def node_agent(mdb, stores) -> Iterator[tuple[object, str, int, list[int]]]:
    """A node with an account of its own (`andreas db add-agent`), and that store."""
    name, node_id, gpu_ids = add_node(stores["admin"], gpus=2)
    account = accounts.add_agent(mdb["engine"], make_url(mdb["admin"]).database, name,
                                 password="pw-node-agent-1", prefix=mdb["prefix"])
    store = open_store(make_url(mdb["admin"]).set(username=account.user,
                                                  password="pw-node-agent-1")
                       .render_as_string(hide_password=False))
    try:
        yield store, name, node_id, gpu_ids
    finally:
        store.dispose()
        with mdb["engine"].begin() as conn:
            conn.exec_driver_sql(f"DROP USER IF EXISTS {account.sql_name.replace('%', '%%')}")


def test_agent_writes_epochs_and_energy_only_for_attempts_on_the_node(stores):
    """The agent account wrote 5 000 kWh on a job that never ran (which also poisoned the
    runtime model): epochs and energy need an attempt of that job on that node."""
    _, node_id, _ = add_node(stores["admin"], gpus=1)
    _, other_id, _ = add_node(stores["admin"], gpus=1)
    never_ran, ran_elsewhere = add_job(stores["admin"]), add_job(stores["admin"])
    add_attempt(stores["admin"], ran_elsewhere, other_id)
    agent = stores["agent"]
    for job in (never_ran, ran_elsewhere):
        assert "never ran on node" in refused_by_trigger(
            agent, lambda s, j=job: insert_epoch_events(s, [epoch(j, node_id)]))
        assert "never ran on node" in refused_by_trigger(agent, lambda s, j=job: insert_job_energy(
            s, [JobEnergyRow(j, 1, 1e6, node_id, 60.0, 1, 1000, 1000)]))
        with agent.session() as s:          # a replayed spool's INSERT IGNORE stores nothing
            try:
                insert_job_energy(s, [JobEnergyRow(job, 1, 1e6, node_id, 60.0, 1, 1, 1)],
                                  skip_duplicates=True)
            except sa.exc.DBAPIError as e:
                assert error_code(e) == 1644
    add_attempt(stores["admin"], never_ran, node_id)
    huge = 5000 * 3_600_000_000                         # 5 000 kWh in mJ
    assert "more energy than" in refused_by_trigger(agent, lambda s: insert_job_energy(
        s, [JobEnergyRow(never_ran, 1, 1e6, node_id, 60.0, 1, huge, 0)]))
    assert "more energy than" in refused_by_trigger(agent, lambda s: insert_job_energy(
        s, [JobEnergyRow(never_ran, 1, 1e6, node_id, 1e9, 1, 1000, 0)]))
    assert "end after it starts" in refused_by_trigger(agent, lambda s: s.execute(sa.text(
        "INSERT INTO epoch_events (job_id, attempt, epoch, start_s, end_s, node_id, gpu_type, "
        "gpus) VALUES (:j, 1, 1, 2.0, 1.0, :n, 'V100', 1)"), {"j": never_ran, "n": node_id}))
    with agent.session() as s:                           # plausible, on its attempt: stored
        insert_epoch_events(s, [epoch(never_ran, node_id)])
        insert_job_energy(s, [JobEnergyRow(never_ran, 1, 1e6, node_id, 60.0, 1,
                                           60 * 300_000, 60 * 100_000)])
    with stores["admin"].session() as s:
        counts = [s.execute(sa.text(f"SELECT COUNT(*) FROM {t} WHERE job_id IN (:a, :b)"),
                            {"a": never_ran, "b": ran_elsewhere}).scalar()
                  for t in ("epoch_events", "job_energy")]
    assert counts == [1, 1]


def test_agent_writes_for_an_andreas_profile_run(stores):
    """`andreas profile` records its runs as completed jobs without attempts; the agents
    store their epochs and energy (profiler/run.py)."""
    _, node_id, _ = add_node(stores["admin"], gpus=1)
    run = add_job(stores["admin"], state=JobState.COMPLETED, weight=0.0)
    with stores["agent"].session() as s:
        insert_epoch_events(s, [epoch(run, node_id)])
        insert_job_energy(s, [JobEnergyRow(run, 1, 1e6, node_id, 60.0, 1, 6000, 0)])


def test_agent_may_move_nodes_only_between_up_and_down(stores):
    """The agent's account set the whole cluster `draining`."""
    _, node_id, _ = add_node(stores["admin"], gpus=1, state=NodeState.UP)
    agent = stores["agent"]
    for state in ("draining", "off", "waking"):
        assert "only between up and down" in refused_by_trigger(agent, lambda s, x=state: s.execute(
            sa.text("UPDATE nodes SET state = :x WHERE id = :n"), {"x": x, "n": node_id}))
    assert "only between up and down" in refused_by_trigger(agent, lambda s: s.execute(
        sa.text("UPDATE nodes SET state = 'draining'")))
    with agent.session() as s:
        assert move_if(s, node_id, NodeState.UP, NodeState.DOWN)
        assert move_if(s, node_id, NodeState.DOWN, NodeState.UP)
    with stores["admin"].session() as s:
        assert s.execute(sa.text("SELECT COUNT(*) FROM nodes WHERE state = 'draining'")
                         ).scalar() == 0


def test_a_nodes_own_agent_account_writes_for_that_node_only(stores, node_agent):
    store, name, node_id, gpu_ids = node_agent
    other, other_id, other_gpus = add_node(stores["admin"], gpus=1, state=NodeState.UP)
    job = add_job(stores["admin"])
    add_attempt(stores["admin"], job, node_id)
    elsewhere = add_job(stores["admin"])
    add_attempt(stores["admin"], elsewhere, other_id)
    writes = {
        "power_samples": lambda s: insert_power_samples(
            s, [PowerRow(other_gpus[0], 5e6, other_id, 1, 100.0, 10)]),
        "host_samples": lambda s: insert_host_samples(s, [HostRow(other_id, 5e6, 1, 1.0, 1,
                                                                  90.0)]),
        "gpu_gaps": lambda s: insert_gpu_gaps(s, [GapRow(other_gpus[0], 5e6, "lost")]),
        "agent_gaps": lambda s: insert_agent_gaps(
            s, [AgentGapRow(other_id, 5e6, 5e6 + 30, False, "agent down")]),
        "epoch_events": lambda s: insert_epoch_events(s, [epoch(elsewhere, other_id)]),
        "job_energy": lambda s: insert_job_energy(
            s, [JobEnergyRow(elsewhere, 1, 5e6, other_id, 60.0, 1, 1000, 1000)]),
        "nodes": lambda s: touch_heartbeat(s, other_id, 5e6),
    }
    for table, write in writes.items():
        message = refused_by_trigger(store, write)
        assert f"may not write {table} for node id {other_id}" in message, message
    assert "is not on node" in refused_by_trigger(store, lambda s: s.execute(sa.text(
        "INSERT INTO power_samples (gpu_id, t, node_id, busy_gpus, power_w) VALUES "
        "(:g, 5e6, :n, 1, 100)"), {"g": other_gpus[0], "n": node_id}))   # its id, their GPU
    with store.session() as s:                                      # its own node: all fine
        insert_power_samples(s, [PowerRow(gpu_ids[0], 5e6, node_id, 1, 100.0, 10)])
        insert_host_samples(s, [HostRow(node_id, 5e6, 1, 1.0, 1, 90.0)])
        insert_gpu_gaps(s, [GapRow(gpu_ids[1], 5e6, "lost")])
        insert_agent_gaps(s, [AgentGapRow(node_id, 5e6, 5e6 + 30, False, "agent down")])
        insert_epoch_events(s, [epoch(job, node_id)])
        insert_job_energy(s, [JobEnergyRow(job, 1, 5e6, node_id, 60.0, 1, 1000, 1000)])
        touch_heartbeat(s, node_id, 5e6)
        assert move_if(s, node_id, NodeState.DOWN, NodeState.UP)
    with stores["admin"].session() as s:
        assert s.execute(sa.text("SELECT last_heartbeat_s FROM nodes WHERE id = :n"),
                         {"n": other_id}).scalar() is None


def test_the_manager_and_the_migrator_are_not_agents(stores):
    """The triggers apply to agent accounts only: the manager still writes any row."""
    _, node_id, gpu_ids = add_node(stores["manager"], gpus=1)
    job = add_job(stores["manager"])
    with stores["manager"].session() as s:
        insert_epoch_events(s, [epoch(job, node_id)])            # no attempt: an operator's
        insert_power_samples(s, [PowerRow(gpu_ids[0], 7e6, node_id, 1, 100.0, 10)])
        s.execute(sa.text("UPDATE nodes SET state = 'draining' WHERE id = :n"), {"n": node_id})


def test_create_users_registers_the_fleet_agent(mdb, stores):
    with stores["admin"].session() as s:
        rows = s.execute(sa.text("SELECT login, node FROM agent_accounts WHERE login = :l"),
                         {"l": f"{mdb['prefix']}agent"}).all()
    assert [tuple(r) for r in rows] == [(f"{mdb['prefix']}agent", None)]
    assert "`agent_accounts` (login, node) VALUES ('andreas_agent', NULL)" in \
        accounts.setup_script()


def test_cli_add_agent_makes_a_nodes_own_account(mdb):
    env = {"ANDREAS_DB_URL": mdb["admin"], "ANDREAS_CONFIG": None,
           "ANDREAS_DB_AGENT_PASSWORD": "pw-cli-agent-1", "ANDREAS_DB_AGENT_PASSWORD_FILE": None}
    prefix = mdb["prefix"]
    done = CliRunner().invoke(main, ["db", "add-agent", "gpu-07", "--prefix", prefix], env=env)
    assert done.exit_code == 0, done.output
    assert f"'{prefix}agent_gpu-07'@'%': agent privileges, for node 'gpu-07' only" in done.output
    assert "pw-cli-agent-1" not in done.output
    with mdb["engine"].connect() as conn:
        assert conn.exec_driver_sql("SELECT node FROM agent_accounts WHERE login = %s",
                                    (f"{prefix}agent_gpu-07",)).scalar() == "gpu-07"
        conn.exec_driver_sql(f"DROP USER '{prefix}agent_gpu-07'@'%%'")
    for args in (["gpu 07"], ["gpu-07", "--account", "alice"], ["x\n"]):
        bad = CliRunner().invoke(main, ["db", "add-agent", *args, "--prefix", prefix], env=env)
        assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output
