"""What MariaDB itself enforces for accounts that are not the manager's
(docs/design/trust.md): the SQL of the submitter's procedures and views and of the
agent's triggers, built from the rules' one owner (:mod:`andreas.jobspec`).

- ``andreas_submit`` checks exactly what the CLI checks (``service/submit.py``), in time
  linear in its input: one ``JSON_TABLE`` pass over the command, one over the
  environment's names and one over its values (the loop of ``JSON_EXTRACT(doc, '$[i]')``
  it replaces was quadratic), after size bounds that refuse a huge document unread.
- Owners are compared byte for byte everywhere (``BINARY``): the tables' collation
  ignores case and accents, so ``Alice`` would otherwise read and cancel ``alice``'s jobs.
- Agents: every account listed in ``agent_accounts`` is an agent. One bound to a node
  (``andreas db add-agent NODE``) may write samples, gaps, epochs and energy for that
  node only and change only that node's row; the fleet's shared account (node NULL,
  ``create-users``) any node's. Either way epochs and energy need an attempt of that job
  on that node, energy is bounded by what the GPUs and host can draw in the interval, and
  an agent may move its node only between ``up`` and ``down``. Accounts not listed
  (manager, migrator, administrators) are limited by their grants alone.

``create(bind)`` (re)creates every object; the migrations call it, so a later change of a
rule is this module plus a migration that calls :func:`recreate`.
"""

from __future__ import annotations

from collections.abc import Callable

from andreas import jobspec
from andreas.limits import REASON_CHARS

LOGIN = "SUBSTRING_INDEX(USER(), '@', 1)"
NUL = "CHAR(0 USING utf8mb4)"
# Energy a job's row may claim per second: a GPU draws at most this (the largest parts
# today are about 1 kW), a node's host share at most that.
MAX_GPU_POWER_W = 2000
MAX_HOST_POWER_W = 20000
MAX_ENERGY_INTERVAL_S = 86400

JOB_COLUMNS = ("id, image, command, env, epochs, epochs_done, submit_s, due_s, weight, "
               "application, grace_s, state, state_changed_s, max_gpus, failures, reason, "
               "predicted_cost, gpu_milli, gpu_memory_mib, owner")
ATTEMPT_COLUMNS = ("id, job_id, attempt, node_id, gpu_ids, container_id, start_s, end_s, "
                   "exit_code, reason, decision_id, gpu_milli, stop_decision_id, "
                   "stop_requested_s, profiling, log_tail, log_saved_s, power_limit_w")


def literal(text: str) -> str:
    """``text`` as an SQL string literal (backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def matches(expr: str, pattern: str) -> str:
    """SQL: ``expr`` matches all of ``pattern``, byte for byte (``\\z``: ``$`` would also
    match before a final newline)."""
    return f"CAST({expr} AS BINARY) REGEXP {literal('^(?:' + pattern + ')' + chr(92) + 'z')}"


def fail(message_sql: str) -> str:
    """SIGNAL an error whose text is the SQL expression ``message_sql`` (<= 128 chars)."""
    return (f"BEGIN SET v_msg = LEFT({message_sql}, 128); "
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg; END")


def same_login(column: str) -> str:
    """SQL: ``column`` is the caller's login, byte for byte (the index serves the first)."""
    return f"{column} = {LOGIN} AND CAST({column} AS BINARY) = CAST({LOGIN} AS BINARY)"


TRIGGER_OWNER = f"""
CREATE TRIGGER jobs_owner_insert BEFORE INSERT ON jobs FOR EACH ROW
SET NEW.owner = {LOGIN}
"""

MY_JOBS = f"""
CREATE SQL SECURITY DEFINER VIEW my_jobs AS
SELECT {JOB_COLUMNS} FROM jobs WHERE {same_login("owner")}
"""

MY_ATTEMPTS = f"""
CREATE SQL SECURITY DEFINER VIEW my_job_attempts AS
SELECT {", ".join("a." + c.strip() for c in ATTEMPT_COLUMNS.split(","))}
FROM job_attempts a JOIN jobs j ON j.id = a.job_id WHERE {same_login("j.owner")}
"""


def _image_check() -> str:
    """A Docker image reference, or '' for a command job (``andreas submit --cmd``, run
    by the Slurm executor): an empty image with a non-empty command list."""
    bad = (f"p_image IS NULL OR CHAR_LENGTH(p_image) > {jobspec.MAX_IMAGE_CHARS} "
           f"OR NOT {matches('p_image', jobspec.IMAGE)}")
    command_job = ("IFNULL(IFNULL(p_image, 'x') = '' AND p_command IS NOT NULL "
                   "AND JSON_VALID(p_command) AND JSON_TYPE(p_command) = 'ARRAY' "
                   "AND JSON_LENGTH(p_command) > 0, FALSE)")
    bad = f"({bad}) AND NOT {command_job}"
    message = (_quoted("image", "p_image") + "not a Docker image reference (or empty, "
               "with a command)')")
    return f"IF {bad}\n  THEN {fail(message)};\n  END IF;"


def _quoted(what: str, expr: str) -> str:
    """The start of a message naming a value: ``CONCAT('image ', QUOTE(LEFT(x, 40)), '``
    (left open: the caller adds the rest and the closing parenthesis)."""
    return f"CONCAT('{what} ', QUOTE(LEFT({expr}, 40)), ': "


def _range(name: str, low: str, high: str, *, required: bool = True) -> str:
    null = f"p_{name} IS NULL OR " if required else f"p_{name} IS NOT NULL AND "
    message = f"CONCAT('{name} ', IFNULL(p_{name}, 'NULL'), ': must be {low}-{high}')"
    return f"IF {null}NOT p_{name} BETWEEN {low} AND {high}\n  THEN {fail(message)};\n  END IF;"


_SUBMIT_HEAD = """
CREATE PROCEDURE andreas_submit(
    IN p_id LONGTEXT, IN p_image LONGTEXT, IN p_command LONGTEXT, IN p_env LONGTEXT,
    IN p_epochs BIGINT, IN p_due_s DOUBLE, IN p_weight DOUBLE, IN p_application LONGTEXT,
    IN p_grace_s DOUBLE, IN p_max_gpus BIGINT, IN p_gpu_milli BIGINT,
    IN p_gpu_memory_mib BIGINT)
MODIFIES SQL DATA SQL SECURITY DEFINER
COMMENT 'andreas: submit a queued job owned by the caller'
BEGIN
  DECLARE v_now DOUBLE DEFAULT UNIX_TIMESTAMP(NOW(6));
  DECLARE v_msg VARCHAR(128);
  DECLARE v_keys LONGTEXT;
  DECLARE v_vals LONGTEXT;
  DECLARE v_count BIGINT;
  DECLARE v_bad BIGINT;
  DECLARE v_nul BIGINT;
  DECLARE v_reserved BIGINT;
  DECLARE v_distinct BIGINT;
  DECLARE v_bytes BIGINT;
  DECLARE v_key LONGTEXT;
"""

_SUBMIT_INSERT = """\
  INSERT INTO jobs (id, image, command, env, epochs, epochs_done, submit_s, due_s, weight,
                    application, grace_s, state, state_changed_s, max_gpus, failures,
                    gpu_milli, gpu_memory_mib)
  VALUES (p_id, p_image, p_command, p_env, p_epochs, 0, v_now, p_due_s, p_weight,
          p_application, p_grace_s, 'queued', v_now, p_max_gpus, 0, p_gpu_milli,
          p_gpu_memory_mib);
END
"""


def _submit_fields() -> str:
    """The scalar arguments, checked against the bounds ``jobspec`` owns."""
    j = jobspec
    grace = (f"CONCAT('grace_s ', IFNULL(p_grace_s, 'NULL'), ': must be above 0, at most "
             f"{j.MAX_GRACE_S:.0f}')")
    return f"""\
  IF p_id IS NULL OR NOT {matches('p_id', j.JOB_ID)}
  THEN {fail(_quoted('job id', 'p_id') + "1-64 of A-Z a-z 0-9 _ . -, not starting with _ . -')")};
  END IF;
  {_image_check()}
  IF p_application IS NULL OR NOT {matches('p_application', j.APPLICATION)}
  THEN {fail(_quoted('application', 'p_application') + "not a valid name')")};
  END IF;
  {_range('epochs', '1', str(j.MAX_EPOCHS))}
  {_range('weight', '0', f'{j.MAX_WEIGHT:.0f}')}
  IF p_grace_s IS NULL OR NOT (p_grace_s > 0 AND p_grace_s <= {j.MAX_GRACE_S:.0f})
  THEN {fail(grace)};
  END IF;
  IF p_due_s IS NULL OR p_due_s <= v_now OR p_due_s > v_now + {j.MAX_DUE_AHEAD_S:.0f}
  THEN {fail("CONCAT('due_s ', IFNULL(p_due_s, 'NULL'), ': must be in the next 10 years')")};
  END IF;
  {_range('max_gpus', '1', str(j.MAX_GPUS), required=False)}
  {_range('gpu_milli', '1', str(j.MAX_GPU_MILLI), required=False)}
  {_range('gpu_memory_mib', '1', str(j.MAX_GPU_MEMORY_MIB), required=False)}
  IF p_gpu_milli IS NOT NULL AND p_max_gpus > 1
  THEN {fail("'max_gpus: a job with a GPU share runs on one GPU'")};
  END IF;
"""


def _submit_command() -> str:
    """The command: a JSON list of strings, without NUL, within its bounds."""
    j = jobspec
    return f"""\
  SET p_command = IFNULL(p_command, '[]');
  SET p_env = IFNULL(p_env, '{{}}');
  IF LENGTH(p_command) > {j.MAX_JSON_TEXT_BYTES} OR NOT JSON_VALID(p_command)
     OR JSON_TYPE(p_command) <> 'ARRAY'
  THEN {fail("'command: must be a JSON list of strings'")};
  END IF;
  SET v_count = JSON_LENGTH(p_command);
  IF v_count > {j.MAX_COMMAND_ITEMS}
  THEN {fail(f"CONCAT('command: ', v_count, ' arguments, at most {j.MAX_COMMAND_ITEMS}')")};
  END IF;
  SELECT MIN(IF(LEFT(t.j, 1) = '"', NULL, t.n)), MIN(IF(LOCATE({NUL}, t.v) > 0, t.n, NULL)),
         IFNULL(SUM(LENGTH(t.v)), 0)
    INTO v_bad, v_nul, v_bytes
    FROM JSON_TABLE(p_command, '$[*]' COLUMNS (n FOR ORDINALITY,
         v LONGTEXT CHARACTER SET utf8mb4 PATH '$', j JSON PATH '$')) t;
  IF v_bad IS NOT NULL
  THEN {fail("CONCAT('command[', v_bad - 1, ']: must be a string')")};
  END IF;
  IF v_nul IS NOT NULL
  THEN {fail("CONCAT('command[', v_nul - 1, ']: must not contain NUL characters')")};
  END IF;
  IF v_bytes > {j.MAX_COMMAND_BYTES}
  THEN {fail(f"CONCAT('command: ', v_bytes, ' bytes, at most {j.MAX_COMMAND_BYTES}')")};
  END IF;
"""


def _submit_env() -> str:
    """The environment: a JSON object of strings, valid names, none reserved, bounded."""
    j = jobspec
    reserved = " OR ".join(f"CAST(k AS BINARY) = BINARY {literal(n)}" for n in j.RESERVED_ENV)
    prefix = literal(j.RESERVED_ENV_PREFIX)
    return f"""\
  IF LENGTH(p_env) > {j.MAX_JSON_TEXT_BYTES} OR NOT JSON_VALID(p_env)
     OR JSON_TYPE(p_env) <> 'OBJECT'
  THEN {fail("'env: must be a JSON object of strings'")};
  END IF;
  SET v_count = JSON_LENGTH(p_env);
  IF v_count > {j.MAX_ENV_ITEMS}
  THEN {fail(f"CONCAT('env: ', v_count, ' variables, at most {j.MAX_ENV_ITEMS}')")};
  END IF;
  SET v_keys = JSON_KEYS(p_env);
  IF JSON_LENGTH(v_keys) <> v_count
  THEN {fail("'env: a variable is given twice'")};
  END IF;
  SELECT MIN(IF({matches('t.k', j.ENV_NAME)}, NULL, t.n)),
         MIN(IF(LEFT(CAST(t.k AS BINARY), {len(j.RESERVED_ENV_PREFIX)}) = BINARY {prefix}
                OR {reserved.replace('CAST(k', 'CAST(t.k')}, t.n, NULL)),
         IFNULL(SUM(LENGTH(t.k)), 0), COUNT(DISTINCT CAST(t.k AS BINARY))
    INTO v_bad, v_reserved, v_bytes, v_distinct
    FROM JSON_TABLE(v_keys, '$[*]' COLUMNS (n FOR ORDINALITY,
         k LONGTEXT CHARACTER SET utf8mb4 PATH '$')) t;
  IF v_bad IS NOT NULL THEN
    SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_bad - 1, ']')));
    {fail(_quoted('env', 'v_key') + "not a valid variable name')")};
  END IF;
  IF v_distinct <> v_count
  THEN {fail("'env: a variable is given twice'")};
  END IF;
  IF v_reserved IS NOT NULL THEN
    SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_reserved - 1, ']')));
    {fail(_quoted('env', 'v_key') + "set by andreas for every job')")};
  END IF;
  IF v_count > 0 THEN
    SET v_vals = JSON_EXTRACT(p_env, '$.*');
    SELECT MIN(IF(LEFT(t.j, 1) = '"', NULL, t.n)), MIN(IF(LOCATE({NUL}, t.v) > 0, t.n, NULL)),
           v_bytes + IFNULL(SUM(LENGTH(t.v)), 0)
      INTO v_bad, v_nul, v_bytes
      FROM JSON_TABLE(v_vals, '$[*]' COLUMNS (n FOR ORDINALITY,
           v LONGTEXT CHARACTER SET utf8mb4 PATH '$', j JSON PATH '$')) t;
    IF v_bad IS NOT NULL THEN
      SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_bad - 1, ']')));
      {fail(_quoted('env', 'v_key') + "the value must be a string')")};
    END IF;
    IF v_nul IS NOT NULL THEN
      SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_nul - 1, ']')));
      {fail(_quoted('env', 'v_key') + "the value must not contain NUL characters')")};
    END IF;
  END IF;
  IF v_bytes > {j.MAX_ENV_BYTES}
  THEN {fail(f"CONCAT('env: ', v_bytes, ' bytes, at most {j.MAX_ENV_BYTES}')")};
  END IF;
"""


def submit_sql() -> str:
    """``andreas_submit``: the arguments of 0006's procedure, checked as the CLI does."""
    return (_SUBMIT_HEAD + _submit_fields() + _submit_command() + _submit_env()
            + _SUBMIT_INSERT)


_NO_OWNER = ("CONCAT('job ', v_id, ': no recorded owner (older than owners); only an "
             "operator may cancel it')")
_NOT_OWNER = ("CONCAT('job ', v_id, ': owned by ', v_owner, '; only its owner or an operator "
              "may cancel it')")
CANCEL = f"""
CREATE PROCEDURE andreas_cancel(IN p_id VARCHAR(64), IN p_reason VARCHAR({REASON_CHARS}))
MODIFIES SQL DATA SQL SECURITY DEFINER
COMMENT 'andreas: cancel one of the caller''s jobs'
BEGIN
  DECLARE v_me VARCHAR(128) DEFAULT {LOGIN};
  DECLARE v_id VARCHAR(64) DEFAULT NULL;
  DECLARE v_owner VARCHAR(128) DEFAULT NULL;
  DECLARE v_state VARCHAR(16) DEFAULT NULL;
  DECLARE v_msg VARCHAR(128);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_id = NULL;
  SELECT id, owner, state INTO v_id, v_owner, v_state FROM jobs WHERE id = p_id FOR UPDATE;
  IF v_id IS NULL
  THEN {fail("CONCAT('job ', p_id, ': no such job')")};
  END IF;
  IF v_owner IS NULL
  THEN {fail(_NO_OWNER)};
  END IF;
  IF CAST(v_owner AS BINARY) <> CAST(v_me AS BINARY)
  THEN {fail(_NOT_OWNER)};
  END IF;
  IF v_state IN ('completed', 'failed', 'cancelled')
  THEN {fail("CONCAT('job ', v_id, ': already ', v_state, '; nothing to cancel')")};
  END IF;
  UPDATE jobs SET state = 'cancelled', state_changed_s = UNIX_TIMESTAMP(NOW(6)),
         reason = IF(IFNULL(p_reason, '') = '', CONCAT('cancelled by ', v_me), p_reason)
   WHERE id = v_id AND state = v_state;
  SELECT v_id AS id, v_state AS was;
END
"""

# 0: an agent writing for a node not its own; 1: not an agent (its grants decide);
# 2: the fleet's shared agent account; 3: the node's own agent.
AGENT_NODE = f"""
CREATE FUNCTION andreas_agent_node(p_node_id BIGINT) RETURNS TINYINT
READS SQL DATA SQL SECURITY DEFINER
COMMENT 'andreas: may the calling agent write for this node'
BEGIN
  DECLARE v_found INT DEFAULT 0;
  DECLARE v_node VARCHAR(128) DEFAULT NULL;
  SELECT COUNT(*), MAX(node) INTO v_found, v_node FROM agent_accounts
   WHERE {same_login("login")};
  IF v_found = 0 THEN RETURN 1; END IF;
  IF v_node IS NULL THEN RETURN 2; END IF;
  RETURN IF(EXISTS (SELECT 1 FROM nodes WHERE id = p_node_id
                     AND CAST(name AS BINARY) = CAST(v_node AS BINARY)), 3, 0);
END
"""


def _agent_trigger(table: str, node_expr: str, extra: str = "", event: str = "INSERT") -> str:
    """A BEFORE trigger on ``table`` refusing an agent's row for a node not its own
    (``node_expr``, in terms of NEW/OLD) and, for agents, whatever ``extra`` refuses."""
    message = (f"CONCAT('agent ', {LOGIN}, ': may not write {table} for node id ', "
               f"IFNULL({node_expr}, 'NULL'), ' (not its node)')")
    return f"""
CREATE TRIGGER agent_{table}_{event.lower()} BEFORE {event} ON {table} FOR EACH ROW
BEGIN
  DECLARE v_msg VARCHAR(128);
  DECLARE v_may TINYINT DEFAULT andreas_agent_node({node_expr});
  IF v_may = 0
  THEN {fail(message)};
  END IF;
  IF v_may >= 2 THEN
    {extra or "BEGIN END"};
  END IF;
END
"""


def _refuse_if(condition: str, message_sql: str) -> str:
    return f"IF {condition}\n    THEN {fail(message_sql)};\n    END IF"


def _gpu_on_node() -> str:
    return _refuse_if(
        "NOT EXISTS (SELECT 1 FROM gpus WHERE id = NEW.gpu_id AND node_id = NEW.node_id)",
        "CONCAT('GPU id ', IFNULL(NEW.gpu_id, 'NULL'), ' is not on node id ', "
        "IFNULL(NEW.node_id, 'NULL'))")


def _attempt_here(table: str) -> str:
    """An attempt of the job ran on the row's node; or the job is the record of an
    ``andreas profile`` run (completed from the start, no attempt at all: only operators
    write such rows, profiler/run.py)."""
    return _refuse_if(
        "NOT EXISTS (SELECT 1 FROM job_attempts WHERE job_id = NEW.job_id "
        "AND attempt = NEW.attempt AND node_id = NEW.node_id) "
        "AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = NEW.job_id "
        "AND j.state = 'completed' AND NOT EXISTS (SELECT 1 FROM job_attempts a "
        "WHERE a.job_id = j.id))",
        f"CONCAT('{table}: job ', NEW.job_id, ' attempt ', NEW.attempt, "
        "' never ran on node id ', NEW.node_id)")


def _energy_bounds() -> str:
    gpu_mj = MAX_GPU_POWER_W * 1000
    host_mj = MAX_HOST_POWER_W * 1000
    condition = (f"NOT (NEW.interval_s > 0 AND NEW.interval_s <= {MAX_ENERGY_INTERVAL_S}) "
                 "OR NEW.gpus < 0 OR NEW.gpu_energy_mj < 0 OR NEW.host_energy_mj < 0 "
                 f"OR NEW.gpu_energy_mj > NEW.interval_s * GREATEST(NEW.gpus, 1) * {gpu_mj} "
                 f"OR NEW.host_energy_mj > NEW.interval_s * {host_mj}")
    message = (f"CONCAT('job_energy: job ', NEW.job_id, ': more energy than "
               f"{MAX_GPU_POWER_W} W a GPU and {MAX_HOST_POWER_W} W of host give in ', "
               "NEW.interval_s, ' s')")
    return _attempt_here("job_energy") + ";\n    " + _refuse_if(condition, message)


def _epoch_bounds() -> str:
    return (_attempt_here("epoch_events") + ";\n    " + _refuse_if(
        "NEW.epoch < 1 OR NOT NEW.end_s >= NEW.start_s",
        "CONCAT('epoch_events: job ', NEW.job_id, ' epoch ', NEW.epoch, "
        "': must be >= 1 and end after it starts')"))


def _node_move() -> str:
    return _refuse_if(
        "NOT (NEW.state = OLD.state OR (OLD.state = 'down' AND NEW.state = 'up') "
        "OR (OLD.state = 'up' AND NEW.state = 'down'))",
        f"CONCAT('agent ', {LOGIN}, ': may move node ', OLD.name, "
        "' only between up and down, not to ', NEW.state)")


def agent_triggers() -> list[tuple[str, str, str]]:
    gpu_node = "(SELECT node_id FROM gpus WHERE id = NEW.gpu_id)"
    return [
        ("FUNCTION", "andreas_agent_node", AGENT_NODE),
        ("TRIGGER", "agent_power_samples_insert",
         _agent_trigger("power_samples", "NEW.node_id", _gpu_on_node())),
        ("TRIGGER", "agent_power_minutes_insert",
         _agent_trigger("power_minutes", "NEW.node_id", _gpu_on_node())),
        ("TRIGGER", "agent_host_samples_insert", _agent_trigger("host_samples", "NEW.node_id")),
        ("TRIGGER", "agent_host_minutes_insert", _agent_trigger("host_minutes", "NEW.node_id")),
        ("TRIGGER", "agent_gpu_gaps_insert", _agent_trigger("gpu_gaps", gpu_node)),
        ("TRIGGER", "agent_agent_gaps_insert", _agent_trigger("agent_gaps", "NEW.node_id")),
        ("TRIGGER", "agent_epoch_events_insert",
         _agent_trigger("epoch_events", "NEW.node_id", _epoch_bounds())),
        ("TRIGGER", "agent_job_energy_insert",
         _agent_trigger("job_energy", "NEW.node_id", _energy_bounds())),
        ("TRIGGER", "agent_nodes_update",
         _agent_trigger("nodes", "OLD.id", _node_move(), event="UPDATE")),
    ]


def objects() -> list[tuple[str, str, str]]:
    """(kind, name, CREATE statement) of everything this module owns, in creation order."""
    return [("TRIGGER", "jobs_owner_insert", TRIGGER_OWNER), ("VIEW", "my_jobs", MY_JOBS),
            ("VIEW", "my_job_attempts", MY_ATTEMPTS),
            ("PROCEDURE", "andreas_submit", submit_sql()),
            ("PROCEDURE", "andreas_cancel", CANCEL), *agent_triggers()]


def drop_statements(items: list[tuple[str, str, str]]) -> list[str]:
    return [f"DROP {kind} IF EXISTS {name}" for kind, name, _ in reversed(items)]


def recreate(execute: Callable[[str], object], items: list[tuple[str, str, str]],
             *, offline: bool = False) -> None:
    """Drop and create ``items`` through ``execute`` (one statement per call). Offline
    (``andreas db upgrade --sql``, fed to the mariadb client) the bodies hold ';', so
    ``execute`` gets them between DELIMITER lines."""
    for statement in drop_statements(items):
        execute(statement + (";" if offline else ""))
    if offline:
        execute("DELIMITER //")
        for _, _, sql in items:
            execute(sql.strip() + "\n//\n")
        execute("DELIMITER ;\n")
        return
    for _, _, sql in items:
        execute(sql)
