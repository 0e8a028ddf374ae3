"""The long-term simulator: trace generation, discrete-event simulation, comparison reports.

It replaces only the agents, Docker and the clock; the optimizer and the cost model are
used unchanged. Modules: ``generate`` (reproducible traces from a seed and profiles/),
``engine`` (the event loop), ``report`` and friends (tables, CSV/JSON, plots). Nothing
is imported here, so ``import andreas.simulator.generate`` stays cheap.
"""
