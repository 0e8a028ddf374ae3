"""The console scripts ``andreas`` and ``andreas-agent``.

Each machine installs the base and the extras of its role (``andreas[agent]`` on a GPU
node, ``andreas[manager]``, ``andreas[plots]``; see pyproject.toml), and the CLIs import
optional libraries only where a command needs them. A command that needs a library this
machine lacks ends here in one line naming the extra that installs it, not a traceback.
"""

from __future__ import annotations

import importlib
import sys

# Top-level module -> the extra that installs it (pyproject.toml [project.optional-dependencies]).
EXTRA_OF = {
    "numpy": "manager", "numba": "manager", "highspy": "manager", "pygad": "manager",
    "rich": "manager", "alembic": "manager", "yaml": "manager", "apscheduler": "manager",
    "docker": "manager", "paramiko": "manager", "matplotlib": "plots",
    "pynvml": "agent", "psutil": "agent", "distributed": "dask",
}


def missing_extra(e: ModuleNotFoundError, *, role: str | None = None) -> str | None:
    """One line naming the extra that installs the missing module (``role``: the extra
    that installs everything this command needs), or None when the module is not an
    optional library (then it is a bug, and the traceback is wanted)."""
    module = (e.name or "").split(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None:
        return None
    extra = role or extra
    return (f"this command needs the Python package {module!r}, which the extra "
            f"andreas[{extra}] installs: pip install 'andreas[{extra}]'")


def andreas() -> None:
    """``andreas``: the cluster's CLI (andreas/cli.py)."""
    _run("andreas.cli", "andreas", role=None)


def agent() -> None:
    """``andreas-agent``: the node agent (agents/cli.py)."""
    _run("agents.cli", "andreas-agent", role="agent")


def _run(module: str, prog: str, *, role: str | None) -> None:
    try:
        importlib.import_module(module).main(prog_name=prog)
    except ModuleNotFoundError as e:
        line = missing_extra(e, role=role)
        if line is None:
            raise
        print(f"{prog}: error: {line}", file=sys.stderr)
        sys.exit(1)
