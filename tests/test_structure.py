"""The size limits of GUIDE.md, checked: small modules and small functions.

No module of ``andreas/`` or ``agents/`` over 600 lines (the Alembic migrations aside), no
function over 100 lines there, and none over 60 in ``andreas/manager/``, where the state
of the running cluster is handled and a long function hides a missed case. A function's
length is ``end_lineno - lineno + 1`` of its ``def`` (decorators not counted), nested
functions measured on their own.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("andreas", "agents")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
MAX_MANAGER_FUNCTION_LINES = 60
MANAGER = "andreas.manager."

@functools.cache
def _modules() -> tuple[Path, ...]:
    found = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
             if "migrations" not in p.relative_to(ROOT).parts]
    assert any(p.relative_to(ROOT).as_posix() == "andreas/manager/reconcile.py" for p in found)
    return tuple(sorted(found))


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def function_lines(source: str) -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function and method in ``source``."""
    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                assert child.end_lineno is not None
                yield prefix + child.name, child.end_lineno - child.lineno + 1
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)
    yield from walk(ast.parse(source), "")


@functools.cache
def _functions() -> dict[str, int]:
    out = {}
    for path in _modules():
        module = _module_name(path)
        for name, lines in function_lines(path.read_text(encoding="utf-8")):
            out[f"{module}:{name}"] = lines
    return out


def _limit(qualified: str) -> int:
    return (MAX_MANAGER_FUNCTION_LINES if qualified.startswith(MANAGER)
            else MAX_FUNCTION_LINES)


def test_no_module_over_600_lines() -> None:
    long = {p.relative_to(ROOT).as_posix(): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_over_its_limit() -> None:
    long = {name: n for name, n in _functions().items()
            if n > _limit(name)}
    assert long == {}, (f"functions over {MAX_FUNCTION_LINES} lines (over "
                        f"{MAX_MANAGER_FUNCTION_LINES} in andreas/manager): {long}")


def test_the_measure_sees_long_and_nested_functions() -> None:
    body = "\n".join(f"    x = {i}" for i in range(70))
    source = f"class A:\n    @staticmethod\n    def f():\n{body.replace('    ', '        ')}\n" \
             f"        def g():\n            pass\n"
    found = dict(function_lines(source))
    assert found == {"A.f": 73, "A.f.g": 2}
    assert _limit("andreas.manager.reconcile:Reconciler.apply") == 60
    assert _limit("andreas.store.procedures:submit_sql") == 100
