"""Job ownership: ``jobs.owner`` and, on MariaDB, what lets users submit without the
manager's account.

- ``jobs.owner`` (NULL for existing rows: a legacy job, an operator's) and the index
  ``ix_jobs_owner (owner, state)`` (``andreas queue --mine``);
- MariaDB only (SQLite has no accounts; there the CLI records the OS user):

  - trigger ``jobs_owner_insert``: every inserted row's owner is the login name of the
    session that inserts it (``SUBSTRING_INDEX(USER(), '@', 1)``), whatever the statement
    said, so nobody, an operator included, submits in another's name;
  - views ``my_jobs`` and ``my_job_attempts`` (SQL SECURITY DEFINER): the caller's own
    jobs and their attempts, all columns; a submitter reads these, never the tables;
  - procedures ``andreas_submit`` and ``andreas_cancel`` (SQL SECURITY DEFINER): the only
    writes a submitter may make. ``andreas_submit`` inserts a ``queued`` job after
    checking every value the manager relies on (the CLI checks the same things first,
    with friendlier messages; the procedure is the boundary for anyone who calls it
    directly); ``andreas_cancel`` cancels a job only for its owner.

The views list their columns: a later migration that adds a column to ``jobs`` or
``job_attempts`` must recreate them (and ``andreas_submit`` if users may set it).
Creating triggers and procedures on a server with binary logging needs SUPER or
``log_bin_trust_function_creators = 1`` (README, "Users and their own accounts").

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

LOGIN = "SUBSTRING_INDEX(USER(), '@', 1)"

JOB_COLUMNS = ("id, image, command, env, epochs, epochs_done, submit_s, due_s, weight, "
               "application, grace_s, state, state_changed_s, max_gpus, failures, reason, "
               "predicted_cost, gpu_milli, gpu_memory_mib, owner")
ATTEMPT_COLUMNS = ("id, job_id, attempt, node_id, gpu_ids, container_id, start_s, end_s, "
                   "exit_code, reason, decision_id, gpu_milli, stop_decision_id, "
                   "stop_requested_s, profiling")


def _fail(message_sql: str) -> str:
    """SIGNAL an error whose text is the SQL expression ``message_sql`` (≤ 128 chars)."""
    return (f"BEGIN SET v_msg = LEFT({message_sql}, 128); "
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg; END")


TRIGGER = f"""
CREATE TRIGGER jobs_owner_insert BEFORE INSERT ON jobs FOR EACH ROW
SET NEW.owner = {LOGIN}
"""

MY_JOBS = f"""
CREATE SQL SECURITY DEFINER VIEW my_jobs AS
SELECT {JOB_COLUMNS} FROM jobs WHERE owner = {LOGIN}
"""

MY_ATTEMPTS = f"""
CREATE SQL SECURITY DEFINER VIEW my_job_attempts AS
SELECT {", ".join("a." + c.strip() for c in ATTEMPT_COLUMNS.split(","))}
FROM job_attempts a JOIN jobs j ON j.id = a.job_id WHERE j.owner = {LOGIN}
"""

# Bounds: a safety net far outside what the CLI accepts, so that no direct call stores a
# value that breaks the scheduler, a container name or a checkpoint path.
SUBMIT = f"""
CREATE PROCEDURE andreas_submit(
    IN p_id VARCHAR(64), IN p_image VARCHAR(512), IN p_command LONGTEXT, IN p_env LONGTEXT,
    IN p_epochs BIGINT, IN p_due_s DOUBLE, IN p_weight DOUBLE, IN p_application VARCHAR(128),
    IN p_grace_s DOUBLE, IN p_max_gpus BIGINT, IN p_gpu_milli BIGINT,
    IN p_gpu_memory_mib BIGINT)
MODIFIES SQL DATA SQL SECURITY DEFINER
COMMENT 'andreas: submit a queued job owned by the caller'
BEGIN
  DECLARE v_now DOUBLE DEFAULT UNIX_TIMESTAMP(NOW(6));
  DECLARE v_msg VARCHAR(128);
  DECLARE v_keys LONGTEXT;
  DECLARE v_key LONGTEXT;
  DECLARE i INT DEFAULT 0;
  IF p_id IS NULL OR CAST(p_id AS BINARY) NOT REGEXP '^[A-Za-z0-9][A-Za-z0-9_.-]{{0,63}}$'
  THEN {_fail("CONCAT('job id ', QUOTE(p_id), ': 1-64 of A-Z a-z 0-9 _ . -')")};
  END IF;
  IF p_image IS NULL OR CAST(p_image AS BINARY) NOT REGEXP '^[A-Za-z0-9][A-Za-z0-9._/:@-]*$'
  THEN {_fail("CONCAT('image ', QUOTE(p_image), ': not a Docker image reference')")};
  END IF;
  IF p_application IS NULL
     OR CAST(p_application AS BINARY) NOT REGEXP '^[A-Za-z0-9][A-Za-z0-9_.+-]{{0,127}}$'
  THEN {_fail("CONCAT('application ', QUOTE(p_application), ': not a valid name')")};
  END IF;
  IF p_epochs IS NULL OR p_epochs < 1 OR p_epochs > 1000000000
  THEN {_fail("CONCAT('epochs ', IFNULL(p_epochs, 'NULL'), ': must be 1-1000000000')")};
  END IF;
  IF p_weight IS NULL OR NOT p_weight BETWEEN 0 AND 1e9
  THEN {_fail("CONCAT('weight ', IFNULL(p_weight, 'NULL'), ': must be 0-1e9')")};
  END IF;
  IF p_grace_s IS NULL OR p_grace_s <= 0 OR p_grace_s > 604800
  THEN {_fail("CONCAT('grace_s ', IFNULL(p_grace_s, 'NULL'), ': must be above 0, at most 7 days')")};
  END IF;
  IF p_due_s IS NULL OR p_due_s <= v_now OR p_due_s > v_now + 315360000
  THEN {_fail("CONCAT('due_s ', IFNULL(p_due_s, 'NULL'), ': must be in the next 10 years')")};
  END IF;
  IF p_max_gpus IS NOT NULL AND NOT p_max_gpus BETWEEN 1 AND 4096
  THEN {_fail("CONCAT('max_gpus ', p_max_gpus, ': must be 1-4096')")};
  END IF;
  IF p_gpu_milli IS NOT NULL AND NOT p_gpu_milli BETWEEN 1 AND 999
  THEN {_fail("CONCAT('gpu_milli ', p_gpu_milli, ': must be 1-999')")};
  END IF;
  IF p_gpu_memory_mib IS NOT NULL AND NOT p_gpu_memory_mib BETWEEN 1 AND 1048576
  THEN {_fail("CONCAT('gpu_memory_mib ', p_gpu_memory_mib, ': must be 1-1048576')")};
  END IF;
  SET p_command = IFNULL(p_command, '[]');
  SET p_env = IFNULL(p_env, '{{}}');
  IF LENGTH(p_command) > 1048576 OR NOT JSON_VALID(p_command)
     OR JSON_TYPE(p_command) <> 'ARRAY'
  THEN {_fail("'command: must be a JSON list of strings, at most 1 MiB'")};
  END IF;
  WHILE i < JSON_LENGTH(p_command) DO
    IF JSON_TYPE(JSON_EXTRACT(p_command, CONCAT('$[', i, ']'))) <> 'STRING'
    THEN {_fail("CONCAT('command[', i, ']: must be a string')")};
    END IF;
    SET i = i + 1;
  END WHILE;
  IF LENGTH(p_env) > 1048576 OR NOT JSON_VALID(p_env) OR JSON_TYPE(p_env) <> 'OBJECT'
  THEN {_fail("'env: must be a JSON object of strings, at most 1 MiB'")};
  END IF;
  SET v_keys = JSON_KEYS(p_env);
  SET i = 0;
  WHILE i < JSON_LENGTH(v_keys) DO
    SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', i, ']')));
    IF CAST(v_key AS BINARY) NOT REGEXP '^[A-Za-z_][A-Za-z0-9_]*$'
    THEN {_fail("CONCAT('env ', QUOTE(v_key), ': not a valid variable name')")};
    END IF;
    IF CAST(v_key AS BINARY) LIKE BINARY 'ANDREAS\\_%'
       OR CAST(v_key AS BINARY) = BINARY 'NVIDIA_VISIBLE_DEVICES'
    THEN {_fail("CONCAT('env ', QUOTE(v_key), ': set by andreas for every job')")};
    END IF;
    IF JSON_TYPE(JSON_EXTRACT(p_env, CONCAT('$.', v_key))) <> 'STRING'
    THEN {_fail("CONCAT('env ', QUOTE(v_key), ': the value must be a string')")};
    END IF;
    SET i = i + 1;
  END WHILE;
  INSERT INTO jobs (id, image, command, env, epochs, epochs_done, submit_s, due_s, weight,
                    application, grace_s, state, state_changed_s, max_gpus, failures,
                    gpu_milli, gpu_memory_mib)
  VALUES (p_id, p_image, p_command, p_env, p_epochs, 0, v_now, p_due_s, p_weight,
          p_application, p_grace_s, 'queued', v_now, p_max_gpus, 0, p_gpu_milli,
          p_gpu_memory_mib);
END
"""

CANCEL = f"""
CREATE PROCEDURE andreas_cancel(IN p_id VARCHAR(64), IN p_reason VARCHAR(255))
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
  THEN {_fail("CONCAT('job ', p_id, ': no such job')")};
  END IF;
  IF v_owner IS NULL
  THEN {_fail("CONCAT('job ', v_id, ': no recorded owner (older than owners); only an operator may cancel it')")};
  END IF;
  IF v_owner <> v_me
  THEN {_fail("CONCAT('job ', v_id, ': owned by ', v_owner, '; only its owner or an operator may cancel it')")};
  END IF;
  IF v_state IN ('completed', 'failed', 'cancelled')
  THEN {_fail("CONCAT('job ', v_id, ': already ', v_state, '; nothing to cancel')")};
  END IF;
  UPDATE jobs SET state = 'cancelled', state_changed_s = UNIX_TIMESTAMP(NOW(6)),
         reason = IF(IFNULL(p_reason, '') = '', CONCAT('cancelled by ', v_me), p_reason)
   WHERE id = v_id AND state = v_state;
  SELECT v_id AS id, v_state AS was;
END
"""

OBJECTS = (("TRIGGER", "jobs_owner_insert", TRIGGER), ("VIEW", "my_jobs", MY_JOBS),
           ("VIEW", "my_job_attempts", MY_ATTEMPTS),
           ("PROCEDURE", "andreas_submit", SUBMIT), ("PROCEDURE", "andreas_cancel", CANCEL))


def _mariadb() -> bool:
    return op.get_bind().dialect.name != "sqlite"


def upgrade() -> None:
    op.add_column("jobs", sa.Column("owner", sa.String(128), nullable=True))
    op.create_index("ix_jobs_owner", "jobs", ["owner", "state"])
    if not _mariadb():
        return
    if context.is_offline_mode():
        # `andreas db upgrade --sql` is fed to the mariadb client: bodies hold ';'.
        out = op.get_context().impl.static_output
        out("DELIMITER //")
        for _, _, sql in OBJECTS:
            out(sql.strip() + "\n//\n")
        out("DELIMITER ;\n")
        return
    bind = op.get_bind()
    for _, _, sql in OBJECTS:
        bind.exec_driver_sql(sql.replace("%", "%%"))       # the driver's paramstyle


def downgrade() -> None:
    if _mariadb():
        for kind, name, _ in reversed(OBJECTS):
            op.execute(f"DROP {kind} IF EXISTS {name}")
    op.drop_index("ix_jobs_owner", "jobs")
    with op.batch_alter_table("jobs") as b:
        b.drop_column("owner")
