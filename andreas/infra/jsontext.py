"""JSON as every command prints and writes it: never NaN or Infinity.

``json.dumps`` writes ``NaN`` and ``Infinity`` by default, which is not JSON (``jq`` and
most parsers refuse it). A non-finite number means "no value" here (an objective a policy
did not compute, a slowdown of a job that never ran), so it becomes ``null``.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (numpy's too) replaced by None, recursively."""
    if isinstance(value, float) or type(value).__name__ in ("float64", "float32", "float16"):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps`` of :func:`finite` of ``value``, refusing NaN and Infinity."""
    return json.dumps(finite(value), allow_nan=False, **options)
