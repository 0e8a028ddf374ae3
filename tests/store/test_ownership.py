"""Job ownership proved against the real MariaDB server: people's own accounts (the
submitter role) submit, read and cancel their own jobs only; the database enforces it, not
the CLI (MariaDB only: SQLite has no accounts; its CLI checks are in
tests/jobs/test_owner_cli.py)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from andreas.cli import main
from andreas.config import ManagerSettings
from andreas.errors import InputError, NotPermitted
from andreas.service import views
from andreas.service.submit import cancel, parse_submission, submit
from andreas.store import Job, JobState, migrate, open_store
from andreas.store import accounts
from andreas.store.engine import error_code, make_engine
from andreas.store.owners import access

from .conftest import Backend, admin_engine
from .helpers import add_node

DENIED = {1044, 1142, 1143, 1227, 1370}
PEOPLE = ("alice", "bob")


@pytest.fixture(scope="module")
def mdb(tmp_path_factory) -> Iterator[dict]:
    backend = Backend("mariadb", tmp_path_factory.mktemp("owner"), admin_engine())
    prefix = f"o{secrets.token_hex(3)}_"
    people = {p: f"{p}{secrets.token_hex(2)}" for p in PEOPLE}   # unique per run
    passwords = {role: secrets.token_urlsafe(12) for role in (*accounts.ROLES, *PEOPLE)}
    admin_url = backend.fresh_url()
    engine = make_engine(admin_url)
    try:
        migrate.upgrade(engine)
        database = make_url(admin_url).database
        accounts.apply(engine, database, {r: passwords[r] for r in accounts.ROLES}, prefix,
                       submitter=True)
        for p, name in people.items():
            accounts.add_user(engine, name, password=passwords[p], prefix=prefix)
        urls = {role: make_url(admin_url).set(username=f"{prefix}{role}",
                                              password=passwords[role])
                .render_as_string(hide_password=False) for role in accounts.ROLES}
        urls.update({p: make_url(admin_url).set(username=name, password=passwords[p])
                     .render_as_string(hide_password=False) for p, name in people.items()})
        stores = {k: open_store(u) for k, u in urls.items()}
        stores["admin"] = open_store(admin_url)
        yield {"stores": stores, "people": people, "urls": urls, "engine": engine,
               "admin": admin_url, "prefix": prefix}
    finally:
        for s in locals().get("stores", {}).values():
            s.dispose()
        for name in people.values():
            accounts.remove_user(engine, name)
        accounts.drop(engine, prefix)
        engine.dispose()
        backend.close()


def spec(name: str | None = None, **extra):
    return parse_submission(image="registry.example/ml/train:1", epochs=5, due="+2h",
                            weight="0.01", env=["SECRET=alice-token"], name=name,
                            now_s=time.time(), **extra)


def denied(store, sql: str, params: dict | None = None) -> int:
    with pytest.raises(sa.exc.DBAPIError) as err, store.session() as s:
        s.execute(sa.text(sql), params or {})
    code = error_code(err.value)
    assert code in DENIED, f"{sql}: expected a privilege error, got {err.value.orig}"
    return code


def row(mdb, job_id: str) -> Job:
    with mdb["stores"]["admin"].session() as s:
        job = s.get(Job, job_id)
        s.expunge(job)
        return job


def test_each_person_is_a_restricted_submitter_and_the_services_are_operators(mdb):
    st, people = mdb["stores"], mdb["people"]
    for p, name in people.items():
        with st[p].session() as s:
            who = access(s)
        assert (who.user, who.restricted, who.operator) == (name, True, False)
    for role in ("manager", "reporter"):
        with st[role].session() as s:
            who = access(s)
        assert who.operator and not who.restricted
        assert who.user == f"{mdb['prefix']}{role}"


def test_a_user_submits_with_their_own_account_and_owns_the_job(mdb):
    st, alice = mdb["stores"], mdb["people"]["alice"]
    job_id = submit(st["alice"], spec(), time.time())
    stored = row(mdb, job_id)
    assert stored.owner == alice
    assert stored.state is JobState.QUEUED and stored.env == {"SECRET": "alice-token"}
    assert stored.submit_s == pytest.approx(time.time(), abs=60)   # the server's clock
    rows = views.queue(st["alice"], ManagerSettings(), time.time(), mine=True)
    assert [(r.id, r.owner) for r in rows] == [(job_id, alice)]
    assert views.show(st["alice"], ManagerSettings(), job_id, time.time()).env == {
        "SECRET": "alice-token"}


def test_the_quick_path_submits_through_the_procedure_in_one_statement(mdb):
    """``andreas submit`` as a person: the driver-only path calls ``andreas_submit`` in
    autocommit mode (no COMMIT follows it) and the job is stored, owned by that person;
    a taken id and a refused field come back as the usual errors, nothing stored."""
    from andreas.store import quick

    alice, url = mdb["people"]["alice"], mdb["urls"]["alice"]
    new = {**dict(zip(quick.COLUMNS, [None] * len(quick.COLUMNS))), "id": "q-Alice-1",
           "image": "registry.example/ml/train:1", "command": [], "env": {"A": "1"},
           "epochs": 3, "epochs_done": 0, "submit_s": time.time(),
           "due_s": time.time() + 3600, "weight": 0.01, "application": "train",
           "grace_s": 30.0, "state": "queued", "state_changed_s": time.time(),
           "failures": 0}
    del new["owner"]
    owner, key = quick.add_job(url, None, new)
    assert owner == alice and key.startswith("mysql:")
    stored = row(mdb, "q-Alice-1")
    assert stored.owner == alice and stored.env == {"A": "1"} and stored.epochs == 3
    with pytest.raises(quick.DuplicateId):
        quick.add_job(url, None, {**new, "id": "Q-ALICE-1"})
    with pytest.raises(InputError, match="epochs"):
        quick.add_job(url, None, {**new, "id": "q-alice-2", "epochs": 0})
    with mdb["stores"]["admin"].session() as s:
        assert s.get(Job, "q-alice-2") is None


def test_another_user_cannot_cancel_read_or_change_the_job(mdb):
    st, alice, bob = mdb["stores"], mdb["people"]["alice"], mdb["people"]["bob"]
    job_id = submit(st["alice"], spec(), time.time())
    bob_store = st["bob"]
    with pytest.raises(NotPermitted) as err:
        cancel(bob_store, job_id, reason="mine now", now_s=time.time())
    assert str(err.value) == (f"job {job_id}: owned by {alice}; only its owner or an "
                              "operator may cancel it")
    with pytest.raises(NotPermitted):                          # the procedure, called directly
        with bob_store.session() as s:
            from andreas.store.submissions import cancel_job
            cancel_job(s, job_id, reason="x", now_s=0.0)
    # Reads: the job is invisible to bob (its env, command, reason and attempts too).
    with pytest.raises(InputError, match=f"none of your jobs \\({bob}\\)"):
        views.show(bob_store, ManagerSettings(), job_id, time.time())
    with pytest.raises(InputError, match="none of your jobs"):
        views.log_source(bob_store, job_id)
    assert job_id not in {r.id for r in views.queue(bob_store, ManagerSettings(), time.time(),
                                                    include_finished=True)}
    with bob_store.session() as s:
        assert s.execute(sa.text("SELECT COUNT(*) FROM my_jobs WHERE id = :j"),
                         {"j": job_id}).scalar() == 0
        assert s.execute(sa.text("SELECT COUNT(*) FROM my_job_attempts WHERE job_id = :j"),
                         {"j": job_id}).scalar() == 0
    for sql in ("SELECT env FROM jobs WHERE id = :j", "SELECT * FROM job_attempts",
                "UPDATE jobs SET state = 'cancelled' WHERE id = :j",
                "UPDATE jobs SET owner = 'x' WHERE id = :j",
                "UPDATE my_jobs SET state = 'cancelled' WHERE id = :j",
                "DELETE FROM jobs WHERE id = :j", "DELETE FROM my_jobs WHERE id = :j",
                "INSERT INTO jobs (id, image, command, env, epochs, epochs_done, submit_s, "
                "due_s, weight, application, grace_s, state, owner) VALUES (:j, 'i', '[]', "
                "'{}', 1, 0, 0, 1, 1, 'a', 1, 'queued', 'alice')",
                "SELECT * FROM power_minutes", "DROP VIEW my_jobs",
                "DROP PROCEDURE andreas_cancel", "CREATE TABLE x (a INT)"):
        denied(bob_store, sql, {"j": job_id + "x" if "INSERT" in sql else job_id})
    after = row(mdb, job_id)
    assert (after.state, after.owner, after.reason) == (JobState.QUEUED, alice, None)


def test_nobody_submits_in_another_users_name(mdb):
    st, alice, bob = mdb["stores"], mdb["people"]["alice"], mdb["people"]["bob"]
    # Through the procedure: no owner argument; the owner is the caller.
    bobs = f"b{secrets.token_hex(4)}"
    with st["bob"].session() as s:
        s.execute(sa.text("CALL andreas_submit(:id, 'reg.example/t:1', '[]', '{}', 3, "
                          "UNIX_TIMESTAMP() + 3600, 1, 'train', 60, NULL, NULL, NULL)"),
                  {"id": bobs})
    assert row(mdb, bobs).owner == bob
    # An operator's direct INSERT naming alice: the trigger records the operator.
    forged = f"f{secrets.token_hex(4)}"
    with st["manager"].session() as s:
        s.execute(sa.text("INSERT INTO jobs (id, image, command, env, epochs, epochs_done, "
                          "submit_s, due_s, weight, application, grace_s, state, owner) "
                          "VALUES (:j, 'i', '[]', '{}', 1, 0, 0, 1, 1, 'a', 1, 'queued', "
                          ":o)"), {"j": forged, "o": alice})
    assert row(mdb, forged).owner == f"{mdb['prefix']}manager"


@pytest.mark.parametrize(("args", "message"), [
    ({"id": "../etc"}, "job id '../etc'"),
    ({"epochs": 0}, "epochs 0: must be 1-1000000"),
    ({"epochs": 10**12}, "epochs 1000000000000"),
    ({"weight": 1e300}, "weight 1e300"),
    ({"grace_s": 1e300}, "grace_s 1e300"),
    ({"due_s": 1.0}, "due_s 1: must be in the next 10 years"),
    ({"env": '{"ANDREAS_JOB_ID": "x"}'}, "env 'ANDREAS_JOB_ID': set by andreas"),
    ({"env": '{"NVIDIA_VISIBLE_DEVICES": "all"}'}, "set by andreas"),
    ({"env": '{"A": 1}'}, "env 'A': the value must be a string"),
    ({"env": '{"a b": "1"}'}, "env 'a b': not a valid variable name"),
    ({"command": '["python", 3]'}, "command[1]: must be a string"),
    ({"command": "python"}, "command: must be a JSON list"),
    ({"image": "bad image"}, "image 'bad image'"),
    ({"image": ""}, "image '': not a Docker image reference (or empty, with a command)"),
    ({"image": "", "command": "{}"}, "image ''"),
    ({"gpu_milli": 1000}, "gpu_milli 1000"),
    # issue 32: what the CLI refused and the procedure stored
    ({"id": "nl\n"}, "job id 'nl\\n'"),                  # REGEXP '$' matched before '\n'
    ({"image": "reg.example/t:1\n"}, "not a Docker image reference"),
    ({"application": "train\n"}, "application 'train\\n'"),
    ({"command": '["a\\u0000b"]'}, "command[0]: must not contain NUL"),
    ({"env": '{"A": "x\\u0000"}'}, "env 'A': the value must not contain NUL"),
    ({"env": '{"A": "1", "A": "2"}'}, "env: a variable is given twice"),
    ({"env": '{"\\u0041": "1", "A": "2"}'}, "env: a variable is given twice"),
    ({"epochs": 10**9}, "epochs 1000000000: must be 1-1000000"),
    ({"weight": 1e9}, "weight 1000000000: must be 0-1000000"),
    ({"grace_s": 7 * 86400}, "grace_s 604800: must be above 0, at most 86400"),
    ({"max_gpus": 2, "gpu_milli": 500}, "a job with a GPU share runs on one GPU"),
    ({"command": json.dumps(["x"] * 32000)}, "command: 32000 arguments, at most 4096"),
    ({"command": json.dumps(["x" * 70000] * 4)}, "command: 280000 bytes, at most 262144"),
    ({"env": json.dumps({f"V{i}": "1" for i in range(1025)})}, "1025 variables, at most 1024"),
    ({"env": json.dumps({"BIG": "x" * 300000})}, "bytes, at most 262144"),
    ({"image": "a" * 600}, "not a Docker image reference"),
    ({"image": "a__b.c/x:1"}, "not a Docker image reference"),   # a registry, not a name
])
def test_the_submit_procedure_checks_what_the_manager_relies_on(mdb, args, message):
    """A user who calls the procedure directly, past the CLI's checks, stores nothing bad."""
    values = {"id": f"p{secrets.token_hex(4)}", "image": "reg.example/t:1", "command": "[]",
              "env": "{}", "epochs": 3, "due_s": time.time() + 3600, "weight": 1.0,
              "application": "train", "grace_s": 60.0, "max_gpus": None, "gpu_milli": None,
              "gpu_memory_mib": None, **args}
    with pytest.raises(sa.exc.DBAPIError) as err, mdb["stores"]["alice"].session() as s:
        s.execute(sa.text("CALL andreas_submit(:id, :image, :command, :env, :epochs, :due_s, "
                          ":weight, :application, :grace_s, :max_gpus, :gpu_milli, "
                          ":gpu_memory_mib)"), values)
    assert error_code(err.value) == 1644
    assert message in str(err.value.orig)
    with mdb["stores"]["admin"].session() as s:
        assert s.get(Job, values["id"]) is None


def test_a_user_submits_a_command_job_without_an_image(mdb):
    """A job for the Slurm executor (``--cmd``, no image) through the submit procedure."""
    st, alice = mdb["stores"], mdb["people"]["alice"]
    job_id = submit(st["alice"], parse_submission(
        cmd="python3 train.py", app="example", epochs=5, due="+2h", weight="0.01",
        now_s=time.time()), time.time())
    stored = row(mdb, job_id)
    assert (stored.owner, stored.image, stored.command) == (alice, "",
                                                            ["python3", "train.py"])


def test_the_owner_cancels_and_reads_their_job(mdb):
    st = mdb["stores"]
    job_id = submit(st["alice"], spec(), time.time())
    node, node_id, _ = add_node(st["admin"], gpus=1)
    with st["admin"].session() as s:
        s.execute(sa.text("INSERT INTO job_attempts (job_id, attempt, node_id, gpu_ids, "
                          "container_id, start_s, profiling) VALUES (:j, 1, :n, '[0]', "
                          "'c0ffee', 1, 0)"), {"j": job_id, "n": node_id})
    src = views.log_source(st["alice"], job_id)
    assert (src.container_id, src.node.name) == ("c0ffee", node)
    stored, was = cancel(st["alice"], job_id, reason="changed my mind", now_s=time.time())
    assert (stored, was) == (job_id, JobState.QUEUED)
    after = row(mdb, job_id)
    assert (after.state, after.reason) == (JobState.CANCELLED, "changed my mind")
    with pytest.raises(InputError, match="already cancelled; nothing to cancel"):
        cancel(st["alice"], job_id, reason="again", now_s=time.time())


def test_the_operator_cancels_and_reads_anyones_job(mdb):
    st = mdb["stores"]
    job_id = submit(st["bob"], spec(), time.time())
    assert views.show(st["manager"], ManagerSettings(), job_id, time.time()).owner == \
        mdb["people"]["bob"]
    assert views.show(st["reporter"], ManagerSettings(), job_id, time.time()).env == {
        "SECRET": "alice-token"}
    stored, was = cancel(st["manager"], job_id, reason="operator: node maintenance",
                         now_s=time.time())
    assert (stored, was) == (job_id, JobState.QUEUED)
    assert row(mdb, job_id).state is JobState.CANCELLED
    with pytest.raises(sa.exc.DBAPIError) as err:            # read-only stays read-only
        cancel(st["reporter"], submit(st["bob"], spec(), time.time()), reason="x",
               now_s=time.time())
    assert error_code(err.value) in DENIED


def test_a_legacy_job_without_owner_is_for_operators_only(mdb):
    st = mdb["stores"]
    job_id = f"legacy{secrets.token_hex(3)}"
    with st["admin"].session() as s:
        s.execute(sa.text("INSERT INTO jobs (id, image, command, env, epochs, epochs_done, "
                          "submit_s, due_s, weight, application, grace_s, state) VALUES "
                          "(:j, 'i', '[]', '{}', 1, 0, 0, 1, 1, 'a', 1, 'queued')"),
                  {"j": job_id})
        s.execute(sa.text("UPDATE jobs SET owner = NULL WHERE id = :j"), {"j": job_id})
    with pytest.raises(NotPermitted, match="no recorded owner"):
        cancel(st["alice"], job_id, reason="x", now_s=time.time())
    assert cancel(st["manager"], job_id, reason="x", now_s=time.time())[1] is JobState.QUEUED


def test_cli_as_a_user_submits_queues_and_is_refused_anothers_job(mdb):
    st, people = mdb["stores"], mdb["people"]
    alices = submit(st["alice"], spec(), time.time())

    def run(person: str, *args: str):
        return CliRunner().invoke(main, list(args), env={"ANDREAS_DB_URL": mdb["urls"][person],
                                                         "ANDREAS_CONFIG": None})

    done = run("bob", "submit", "reg.example/ml/bert:2", "--epochs", "3", "--due", "+3h",
               "--weight", "0.5", "-q")
    assert done.exit_code == 0, done.output
    bobs = done.output.strip()
    assert row(mdb, bobs).owner == people["bob"]
    listed = run("bob", "queue", "--json")
    assert listed.exit_code == 0, listed.output
    shown = {r["id"]: r["owner"] for r in json.loads(listed.output)}
    assert shown[bobs] == people["bob"] and alices not in shown
    assert set(shown.values()) == {people["bob"]}
    refused = run("bob", "cancel", alices)
    assert refused.exit_code == 2
    assert refused.output.strip().splitlines() == [
        f"andreas: error: job {alices}: owned by {people['alice']}; only its owner or an "
        "operator may cancel it"]
    assert row(mdb, alices).state is JobState.QUEUED
    hidden = run("bob", "show", alices)
    assert hidden.exit_code == 2 and "none of your jobs" in hidden.output
    mine = run("bob", "cancel", bobs)
    assert mine.exit_code == 0 and f"job {bobs}: cancelled (was queued)" in mine.output


def test_the_sql_script_creates_the_role_create_users_creates(mdb):
    script = accounts.setup_script("andreas", mdb["prefix"])
    role = accounts.submitter_role(mdb["prefix"])
    assert f"CREATE ROLE IF NOT EXISTS `{role}`;" in script
    for statement in accounts.submitter_grants("andreas", mdb["prefix"]):
        assert statement + ";" in script
    with mdb["engine"].connect() as conn:
        shown = {g for g in conn.exec_driver_sql(f"SHOW GRANTS FOR `{role}`").scalars()
                 if not g.startswith("GRANT USAGE")}
    database = make_url(mdb["admin"]).database
    assert shown == set(accounts.submitter_grants(database, mdb["prefix"]))


# ------------------------------------------------------------------ issue 32, point 8
CALL = ("CALL andreas_submit(:id, :image, :command, :env, :epochs, :due_s, :weight, "
        ":application, :grace_s, :max_gpus, :gpu_milli, :gpu_memory_mib)")
TRICKY = ["x", "x\n", "\nx", "x\r", "x\x00", "X", "x" * 64, "x" * 65, "x" * 300, "-x", "_x",
          ".x", "x.y", "x y", "x\t", "é", "x/y", "x:1", "[/b]", "$x", "x;drop", "'", '"',
          "\\", "x\u2028", "x\x1b[2J", "0", "A_B", "a__b", "a--b", "x" * 128, "x" * 129]
IMAGES = ["reg.example/t:1", "reg.example/t:1\n", "t", "T", "localhost/x", "localhost:5000/x",
          "Reg.example/x", "a__b/x", "a__b.c/x", "a.b", "a.b/c", "x:tag\n", "x@sha256:" + "a" * 64,
          "x@sha256:" + "A" * 64, "x:" + "t" * 128, "x:" + "t" * 129, "a/" + "b" * 253,
          "a/" + "b" * 254, "r.io/" + "b" * 255, "r.io/" + "b" * 256, "x//y", "x/", "/x",
          "reg.example:99999/x", "reg.example:123456/x", "x:-t", "x:.t", "x:_t", "é/x", ""]


def _verdicts(mdb, **field_values):
    """(CLI accepts, procedure accepts) for one submission differing from a valid one in
    the given fields (each a list of values, taken together by position)."""
    out = []
    names = list(field_values)
    for values in zip(*field_values.values()):
        given = dict(zip(names, values))
        try:
            parse_submission(image=given.get("image", "reg.example/t:1"), epochs=3,
                             due="+2h", weight="1", app=given.get("app", "train"),
                             cmd=given.get("cmd"), env=given.get("env"),
                             name=given.get("name", "ok"), now_s=time.time())
            cli = True
        except InputError:
            cli = False
        params = {"id": f"v{secrets.token_hex(5)}" if "name" not in given else given["name"],
                  "image": given.get("image", "reg.example/t:1"),
                  "command": json.dumps(given.get("cmd") or [], ensure_ascii=False),
                  "env": json.dumps(dict(given.get("env") or {}), ensure_ascii=False),
                  "epochs": 3, "due_s": time.time() + 7200, "weight": 1.0,
                  "application": given.get("app", "train"), "grace_s": 60.0,
                  "max_gpus": None, "gpu_milli": None, "gpu_memory_mib": None}
        try:
            with mdb["stores"]["alice"].session() as s:
                s.execute(sa.text("SAVEPOINT v"))
                s.execute(sa.text(CALL), params)
                s.execute(sa.text("ROLLBACK TO SAVEPOINT v"))
            sql = True
        except sa.exc.DBAPIError as e:
            assert error_code(e) in (1644, 1406, 1366), e     # a refusal, not a crash
            sql = False
        out.append((repr(values), cli, sql))
    return [o for o in out if o[1] != o[2]]


def test_the_procedure_accepts_exactly_what_the_cli_accepts(mdb):
    """One rule, two checkers (andreas/jobspec.py): for every tricky value of every
    checked string field, the CLI and the procedure give the same verdict."""
    differ = []
    differ += _verdicts(mdb, name=TRICKY)
    differ += _verdicts(mdb, app=TRICKY)
    differ += _verdicts(mdb, image=IMAGES + TRICKY)
    differ += _verdicts(mdb, env=[{k: "1"} for k in TRICKY + ["ANDREAS_X", "andreas_x",
                                                            "NVIDIA_VISIBLE_DEVICES"]])
    differ += _verdicts(mdb, env=[{"V": v} for v in TRICKY])
    differ += _verdicts(mdb, cmd=[[v] for v in TRICKY] + [["x"] * 4096, ["x"] * 4097,
                                                          ["é" * 131072], ["é" * 131073]])
    assert differ == []


def test_case_variant_accounts_are_refused_and_never_share_jobs(mdb):
    """`Alice` next to `alice` read alice's jobs (env included) and cancelled them: the
    views and procedures compared owners with the table's case-insensitive collation."""
    st, alice = mdb["stores"], mdb["people"]["alice"]
    engine = mdb["engine"]
    with pytest.raises(InputError, match="differ in more than case"):
        accounts.add_user(engine, alice.upper(), password="pw-x1", prefix=mdb["prefix"])
    job_id = submit(st["alice"], spec(), time.time())
    # An administrator made the case variant by hand: it still sees and cancels nothing.
    variant = alice.capitalize()
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE USER '{variant}'@'%%' IDENTIFIED BY 'pw-variant-1'")
        conn.exec_driver_sql(f"GRANT `{accounts.submitter_role(mdb['prefix'])}` TO "
                             f"'{variant}'@'%%'")
        conn.exec_driver_sql(f"SET DEFAULT ROLE `{accounts.submitter_role(mdb['prefix'])}` "
                             f"FOR '{variant}'@'%%'")
    other = open_store(make_url(mdb["admin"]).set(username=variant, password="pw-variant-1")
                       .render_as_string(hide_password=False))
    try:
        with other.session() as s:
            assert s.execute(sa.text("SELECT COUNT(*) FROM my_jobs WHERE id = :j"),
                             {"j": job_id}).scalar() == 0
        assert job_id not in {r.id for r in views.queue(other, ManagerSettings(), time.time(),
                                                        include_finished=True)}
        with pytest.raises(NotPermitted, match=f"owned by {alice}"):
            cancel(other, job_id, reason="mine", now_s=time.time())
    finally:
        other.dispose()
        accounts.remove_user(engine, variant)
    assert row(mdb, job_id).state is JobState.QUEUED


@pytest.mark.parametrize("name", ["andreas_agent", "andreas_manager", "andreas_submitter",
                                  "ANDREAS_MIGRATOR", "root", "mariadb.sys", "bob\n",
                                  "bo\x1bb", "bob\x00", "bo b", "-bob", "b" * 81])
def test_add_user_refuses_service_names_and_control_characters(mdb, name):
    """`add-user andreas_manager` reset the manager's password; `bob\\n` passed the name
    pattern ('$' before a final newline). Nothing about such an account changes."""
    def accounts_named() -> list:
        with mdb["engine"].connect() as conn:
            return conn.exec_driver_sql(
                "SELECT User, Host, Priv FROM mysql.global_priv WHERE LOWER(User) = "
                "LOWER(%s) ORDER BY User, Host", (name.strip(),)).all()
    before = accounts_named()
    result = CliRunner().invoke(main, ["db", "add-user", "--", name], env={
        "ANDREAS_DB_URL": mdb["admin"], "ANDREAS_CONFIG": None,
        "ANDREAS_DB_USER_PASSWORD": "pw-never-1", "ANDREAS_DB_USER_PASSWORD_FILE": None})
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert accounts_named() == before


def test_a_persons_account_has_statement_and_connection_limits(mdb):
    with mdb["engine"].connect() as conn:
        limits = conn.exec_driver_sql(
            "SELECT max_statement_time, max_user_connections FROM mysql.user WHERE User = %s",
            (mdb["people"]["bob"],)).one()
    assert (float(limits[0]), int(limits[1])) == (accounts.PERSON_MAX_STATEMENT_S,
                                                  accounts.PERSON_MAX_CONNECTIONS)


def test_the_manager_refuses_a_submitters_account_in_one_line(mdb):
    result = CliRunner().invoke(main, ["manager", "run", "--dry-run", "--once"], env={
        "ANDREAS_DB_URL": mdb["urls"]["alice"], "ANDREAS_CONFIG": None})
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "not the manager's" in lines[0] and mdb["people"]["alice"] in lines[0]
