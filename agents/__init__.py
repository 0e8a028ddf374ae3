"""The andreas node agent (ANDREAS' profiler daemon): measures GPUs, host and epochs."""
