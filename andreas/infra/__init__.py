"""Infrastructure written once: the atomic writer (``fileio``), times and durations as
people read and type them (``timefmt``), the back-off rule (``backoff``) and the settings
checker (``fields``). Stdlib only: the node agent imports them too."""
