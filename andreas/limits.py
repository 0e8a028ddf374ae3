"""Every bound an input is held to, defined once (and the units they are written in).

A value past a bound is a typo that would hang a loop, overflow a column, plan a job
first for ever or turn an objective into NaN. The same quantity may reach andreas
through a config file, a snapshot or trace, a job submission (the CLI and MariaDB's
``andreas_submit``), a tariff file or an option, and each of those checks it against
the one constant here (``tests/test_limits.py`` feeds the same value through each).
Stdlib only: the agent, ``andreas submit`` and the store's procedures read it.
"""

from __future__ import annotations

# -- units -------------------------------------------------------------------------------
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
J_PER_KWH = 3.6e6
MJ_PER_KWH = 3.6e9          # the store keeps energy in integer millijoules (NVML's unit)
MIB = 1 << 20               # bytes

# -- energy ------------------------------------------------------------------------------
# PUE is facility power over IT power, so never below 1; a facility burning 4 W of
# overhead per IT watt is a typo. One rule for config, snapshots, traces and tariffs.
MIN_PUE = 1.0
MAX_PUE = 5.0
MAX_PRICE_PER_KWH = 1000.0  # above this, a unit mistake (cents? MWh?)
MAX_PENALTY = 1e6           # rho, mu (per idle GPU)
MAX_POWER_W = 1e6           # a node's draw, a GPU's power limit

# -- jobs --------------------------------------------------------------------------------
MAX_EPOCHS = 1_000_000
MAX_WEIGHT = 1e6            # currency per second late
# A job runs on one node, so it never holds more GPUs than a node has.
MAX_GPUS_PER_NODE = 1024
MAX_GPUS_PER_JOB = MAX_GPUS_PER_NODE
MAX_GRACE_S = SECONDS_PER_DAY       # SIGTERM -> SIGKILL, a restart overhead; above 0
MAX_IMAGE_CHARS = 512               # jobs.image
REASON_CHARS = 255                  # every `reason` column, and the lease holder

# -- time --------------------------------------------------------------------------------
# What a restart from a checkpoint costs before a job works again (container start,
# imports, checkpoint load): the manager's default and the simulator's in epoch mode (in
# the papers' exact mode restarts are free); measured on the example job (docs/results.md,
# "Restart overhead"). Here, not in model.py, so the config (and `andreas submit`) need not
# import the model.
DEFAULT_RESTART_OVERHEAD_S = 10.0
MIN_PERIOD_S = 0.1                  # the rescheduling period H (manager ticks are >= 0.1 s apart)
MIN_TRACE_PERIOD_S = 1.0            # H in a snapshot or trace, and in the simulator
MAX_PERIOD_S = 30 * SECONDS_PER_DAY
MAX_DAYS = 3650.0                   # retention, look-back windows, half-lives

# -- the optimizer -----------------------------------------------------------------------
MAX_SEED = 2**63 - 1                # numpy's generators take 0 <= seed
MAX_ITERATIONS = 100_000            # a typo (10**7) is an error, not gigabytes
MAX_TIME_LIMIT_S = SECONDS_PER_DAY  # a solver's time limit
MAX_GA_SIZE = 10_000                # chromosomes per generation, generations per decision


def reason(text: str) -> str:
    """``text`` cut to what a reason column holds."""
    return text[:REASON_CHARS]
