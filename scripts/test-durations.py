#!/usr/bin/env python3
"""Per-module wall time of a pytest run, from its JUnit XML report(s).

    python3 scripts/test-durations.py out/junit.xml [more.xml ...] [--top N]

Each test's time is setup + call + teardown (pytest's default ``junit_duration_report``);
a module's time is the sum over its tests, so with ``-n`` workers the modules add up to
more than the run's wall time. Prints the modules, slowest first, and the total.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def module_of(classname: str) -> str:
    """``tests.e2e.test_x.TestY`` -> ``tests/e2e/test_x.py``."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        if parts[i - 1].startswith("test_"):
            return "/".join(parts[:i]) + ".py"
    return "/".join(parts) + ".py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", help="JUnit XML files (pytest --junit-xml)")
    ap.add_argument("--top", type=int, default=0, help="print only the N slowest modules")
    args = ap.parse_args(argv)
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for path in args.reports:
        for case in ET.parse(path).getroot().iter("testcase"):
            module = module_of(case.get("classname", ""))
            seconds[module] += float(case.get("time", 0.0))
            tests[module] += 1
    rows = sorted(seconds.items(), key=lambda kv: -kv[1])
    for module, s in rows[:args.top or None]:
        print(f"{s:8.1f} s  {tests[module]:5d}  {module}")
    print(f"{sum(seconds.values()):8.1f} s  {sum(tests.values()):5d}  total ({len(rows)} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
