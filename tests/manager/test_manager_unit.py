"""The shipped manager unit (systemd/andreas-manager.service) can run the default policy:
``andreas manager run --once`` under the unit's own restrictions (systemd-run where
systemd runs, else emulated: tests/manager/unit_sandbox.py) makes a decision with the
compiled optimizer, whose cache it writes to the unit's CacheDirectory.

The optimizer's kernels are copied into that cache first (all but one, which the run
compiles and writes itself): a cold compile of all of them takes 20-60 s."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from andreas.store import Decision, migrate, open_store
from tests.manager import unit_sandbox as sandbox
from tests.manager.helpers import add_job, add_node

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "andreas-manager.service"
LEFT_TO_COMPILE = "kernels.construct_rows-"   # the sandboxed run compiles this one
CHECK = """
import mmap, os, pathlib, sys
def denied(path):
    try:
        pathlib.Path(path).write_text("x")
    except OSError:
        return True
    return False
assert os.getuid() == 65534, os.getuid()
assert denied(sys.argv[1] + "/.unit-test") and denied("/etc/.unit-test"), "writable"
for d in ("/var/lib/andreas", "/var/cache/andreas"):
    assert not denied(d + "/.unit-test"), d
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except OSError:
    print("mdwe")
print("ok")
"""


def seed_cache(cache: Path) -> None:
    """The kernels compiled here (the suite's __pycache__), where NUMBA_CACHE_DIR puts
    them for kernels.py, but one."""
    from numba.core.caching import _CacheLocator

    from andreas.optimizer import kernels
    from andreas.optimizer.warmup import warm

    warm()
    source = Path(kernels.__file__).parent / "__pycache__"
    target = cache / _CacheLocator.get_suitable_cache_subpath(kernels.__file__)
    target.mkdir(parents=True)
    for f in source.glob("kernels.*.nb[ic]"):
        if not f.name.startswith(LEFT_TO_COMPILE):
            shutil.copy2(f, target / f.name)


def run(unit: sandbox.Unit, tmp: Path, argv: list[str]) -> subprocess.CompletedProcess:
    env = {**unit.environment(), "PATH": "/usr/bin:/bin", "HOME": "/",
           "STATE_DIRECTORY": "/var/lib/andreas", "CACHE_DIRECTORY": "/var/cache/andreas",
           "ANDREAS_CONFIG": "/var/lib/andreas/andreas.toml", "PYTHONDONTWRITEBYTECODE": "1"}
    binds = {"/var/lib/andreas": tmp / "state", "/var/cache/andreas": tmp / "cache"}
    return subprocess.run(sandbox.command(unit, argv, env, binds), capture_output=True,
                          text=True, timeout=300, cwd="/")


@pytest.fixture
def unit_dirs(tmp_path):
    for d in ("state", "cache"):
        (tmp_path / d).mkdir()
        sandbox.chown_nobody(tmp_path / d)       # systemd makes them the unit user's
    return tmp_path


def test_every_directive_of_the_unit_is_emulated_or_explained():
    unit = sandbox.Unit.read(UNIT)
    assert unit.unknown() == set()
    assert "/var/cache/andreas" in sandbox.writable(unit)        # a place for the cache
    assert unit.environment().get("NUMBA_CACHE_DIR", "").startswith("/var/cache/andreas")


def test_the_sandbox_holds_what_the_unit_says(unit_dirs):
    unit = sandbox.Unit.read(UNIT)
    done = run(unit, unit_dirs, [sys.executable, "-c", CHECK, str(ROOT)])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "ok"
    mdwe = "mdwe" in done.stdout.split()
    assert mdwe == (unit.get("MemoryDenyWriteExecute") == "yes")


@pytest.mark.slow
def test_the_manager_decides_under_its_own_unit(unit_dirs):
    unit = sandbox.Unit.read(UNIT)
    state, cache = unit_dirs / "state", unit_dirs / "cache"
    db = state / "andreas.db"
    url = migrate.upgrade_url(f"sqlite:///{db}")
    store = open_store(url)
    try:
        add_node(store, "n1", gpus=2)
        add_job(store, "j1", epochs=3)
    finally:
        store.dispose()
    (state / "andreas.toml").write_text(
        '[store]\nurl = "sqlite:////var/lib/andreas/andreas.db"\n[manager]\npoll_s = 0.1\n')
    seed_cache(Path(unit.environment()["NUMBA_CACHE_DIR"].replace(
        "/var/cache/andreas", str(cache))))
    sandbox.chown_nobody(state)
    sandbox.chown_nobody(cache)
    andreas = str(Path(sys.executable).parent / "andreas")
    done = run(unit, unit_dirs, [andreas, "manager", "run", "--once", "--dry-run"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cannot allocate executable memory" not in done.stderr
    store = open_store(f"sqlite:///{db}")
    try:
        with store.session() as s:
            decisions = s.execute(select(Decision.policy, Decision.plan)).all()
    finally:
        store.dispose()
    assert [p for p, _ in decisions] == ["rg"]                  # the default policy
    assert decisions[0][1]["assignments"][0]["job"] == "j1"
    compiled = list(cache.rglob(f"{LEFT_TO_COMPILE}*.nbi"))
    assert compiled and compiled[0].stat().st_uid == sandbox.NOBODY   # written by the unit
