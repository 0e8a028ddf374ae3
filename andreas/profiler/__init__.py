"""The Job Profiler: short runs of a new application on the profiling node(s) per GPU count
(``run``, ``nodes``), Amdahl's-law runtime models with their error and a confidence per
prediction (``fit``), the store writes and the production refinement from epoch events
(``store``), and the held-out check on ``profiles/`` (``heldout``).

Only the pure fit is imported here (the Job Manager's estimates use it); the rest is
imported where used.
"""

from andreas.profiler.fit import AmdahlFit, confidence, fit_amdahl, predict, source_tag

__all__ = ["AmdahlFit", "confidence", "fit_amdahl", "predict", "source_tag"]
