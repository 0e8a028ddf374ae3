"""The documents andreas reads and writes: snapshots (``andreas-snapshot/1``), traces
(``andreas-trace/1``) and the strict JSON/YAML loading both share (docs/FORMAT.md)."""
