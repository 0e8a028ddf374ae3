"""The documentation's limits, so that they stay true: a README and an ARCHITECTURE a
newcomer reads through, module docstrings that say why in a few lines, prose that does
not date itself, a site whose every page exists, and no path of one development machine
anywhere in the repository.

`mkdocs build --strict` itself (broken links and anchors included) runs in
scripts/test.sh.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
MAX_README_LINES = 250
MAX_ARCHITECTURE_LINES = 400
MAX_MODULE_DOCSTRING_LINES = 40
# The prose must not date itself by the order of the work ("the Nth session ...",
# "since YYYY-MM-DD ..."); the test below shows what it catches.
DATING = re.compile(r"\b(\d+(st|nd|rd|th)|first|second|third|fourth|fifth|sixth|later|"
                    r"earlier|previous) session\b|(?<![-\w])since \d{4}-\d\d-\d\d", re.IGNORECASE)


def _lines(name: str) -> int:
    return len((ROOT / name).read_text(encoding="utf-8").splitlines())


def test_readme_is_short() -> None:
    assert _lines("README.md") <= MAX_README_LINES


def test_architecture_is_short() -> None:
    assert _lines("ARCHITECTURE.md") <= MAX_ARCHITECTURE_LINES


def _repository_files() -> list[str]:
    """Every file in the repository (tracked, or new and not ignored), relative to it."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True, text=True).stdout
    names = [name for name in listed.splitlines() if (ROOT / name).is_file()]
    assert len(names) > 300       # git listed the repository
    return names


def _modules() -> list[Path]:
    """Every Python module of the repository but the database migrations."""
    found = [ROOT / name for name in _repository_files()
             if name.endswith(".py") and "migrations" not in Path(name).parts]
    assert any(p.parts[-2:] == ("andreas", "costs.py") for p in found)
    return sorted(found)


def _module_docstring_lines(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return 0
    assert first.end_lineno is not None
    return first.end_lineno - first.lineno + 1


def test_module_docstrings_are_short() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _modules()
            if (n := _module_docstring_lines(p)) > MAX_MODULE_DOCSTRING_LINES}
    assert long == {}, f"module docstrings over {MAX_MODULE_DOCSTRING_LINES} lines: {long}"


def test_docstring_count_sees_a_long_one(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""' + "line\n" * 41 + '"""\nX = 1\n', encoding="utf-8")
    assert _module_docstring_lines(module) == 42
    module.write_text("X = 1\n", encoding="utf-8")
    assert _module_docstring_lines(module) == 0


def _prose() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*.md") if "measurements" not in p.parts]
    return [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "CHANGELOG.md", *docs]


def test_prose_does_not_date_itself() -> None:
    found = []
    for path in [*_prose(), *_modules()]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if DATING.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_dating_pattern_sees_one() -> None:
    assert DATING.search("re-run on the 4th " + "session")
    assert DATING.search("(3rd " + "session)") and DATING.search("since " + "2026-11-26")
    assert not DATING.search("andreas report --since 2026-11-01 --by day")


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {nav!r}")


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_page_the_site_names_exists() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = _nav_pages(config["nav"])
    assert "index.md" in pages and "cli.md" in pages and "results.md" in pages
    generated = _hooks().ROOT_PAGES       # root files the hooks show as pages
    for source in generated:
        assert (ROOT / source).is_file(), source
    missing = [p for p in pages
               if p not in generated.values() and not (ROOT / "docs" / p).is_file()]
    assert missing == []
    for hook in config["hooks"]:
        assert (ROOT / hook).is_file(), hook
    # every Markdown page under docs/ is in the navigation (measurements are logs)
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")
               if "measurements" not in p.parts}
    assert on_disk - set(pages) == set()


def test_cli_reference_sees_every_command() -> None:
    """mkdocs-click lists a group's `commands` as they are; the andreas group loads its
    families on first use, so the site's hook must load them all first (checked in a
    fresh interpreter: in this one other tests may have loaded them already)."""
    from andreas.cli.root import COMMAND_MODULES

    script = ("import importlib.util, sys\n"
              "spec = importlib.util.spec_from_file_location('h', sys.argv[1])\n"
              "hooks = importlib.util.module_from_spec(spec); spec.loader.exec_module(hooks)\n"
              "from andreas.cli.root import main\n"
              "before = set(main.commands)\n"
              "hooks.on_config({})\n"
              "print(len(before), ' '.join(sorted(main.commands)))\n")
    out = subprocess.run([sys.executable, "-c", script, str(ROOT / "docs" / "hooks.py")],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    before, listed = int(out[0]), set(out[1:])
    assert before < len(listed)             # the group is lazy: the hook is needed
    assert set(COMMAND_MODULES) <= listed
    assert {"optimize", "compare", "policies", "simulate", "submit", "manager"} <= listed


# A path of a development machine ("/" "work/...", a home directory) works on that machine
# only; code reaches the shared data as ../shared from the repository root. The homes
# below are inputs of tests (settings from $HOME, paths a container may not mount).
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:" + "work" + r"|home)/([\w.-]*)")
EXAMPLE_HOMES = {"ops", "alice", "u"}


def _machine_paths(text: str) -> list[str]:
    return [m.group(0) for m in MACHINE_PATH.finditer(text)
            if not (m.group(0).startswith("/" + "home/") and m.group(1) in EXAMPLE_HOMES)]


def test_machine_path_check_sees_one() -> None:
    assert _machine_paths('Path("/' + 'work/shared/traces")') == ["/" + "work/shared"]
    home = "/" + "home"
    assert _machine_paths(f"cd {home}/jane/andreas") == [f"{home}/jane"]
    assert _machine_paths(f'HOME="{home}/ops"; ../shared/traces; a/work/b') == []


def test_no_machine_path_in_the_repository() -> None:
    found = []
    for name in _repository_files():
        data = (ROOT / name).read_bytes()
        if b"\0" in data:               # binary
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if hits := _machine_paths(line):
                found.append(f"{name}:{n}: {', '.join(hits)}")
    assert found == []
