"""``andreas report``: energy, cost and CO2 per job, node and day/week, and the validation of
the predicted costs against the measured ones (the ANDREAS paper's Table III).

One place reads the store (:func:`andreas.report.read.read_window`: every row the report
needs for a window, plain frozen rows); everything after that is pure:

- :mod:`andreas.report.window` — ``--since/--until`` parsing, UTC day / ISO week periods;
- :mod:`andreas.report.compute` — rows per job, node and period and the totals;
- :mod:`andreas.report.validate` — predicted vs actual cost per rescheduling slot;
- :mod:`andreas.report.formats` — terminal table (rich), CSV, JSON;
- :mod:`andreas.report.html` — one self-contained HTML page with PNG plots.

Definitions shared by all of them (also in docs/reports.md):

- Energy is read from the 1-minute aggregates (``power_minutes`` + ``host_minutes``, GPU
  and host energy in mJ) and from ``job_energy`` windows. A minute (or a job-energy window)
  that straddles a boundary of the report window, a period or a slot counts with the
  fraction of its duration inside it, so figures over adjacent intervals add up exactly to
  the figure over their union (and are exact for constant power within a minute).
- A node's energy includes its idle GPUs and host; a job's energy is what the agent
  attributed to it (its GPUs plus its share of host energy). ``unattributed`` = node energy
  − jobs' energy: idle GPUs, host energy of nodes without jobs, and whatever no reading
  attributed. It is shown, never clamped, so totals reconcile:
  ``energy = jobs' energy + unattributed`` and
  ``total cost = Σ jobs' actual cost + unattributed energy cost``.
- Energy cost = kWh × PUE × price (``[manager] energy_pue``, ``price_per_kwh``); with
  ``[manager] tariff`` each minute's (each job-energy window's) kWh × price(t) · PUE(t) at
  the time it was used (:meth:`andreas.accounting.Prices.bill`). Money is in the currency of
  that price. CO2 (optional) = kWh × PUE × grid g/kWh / 1000 (the grid
  delivers the facility's energy, IT energy × PUE).
- Tardiness penalty = weight (per second) × seconds past the due date *within the window*
  (up to the job's end, or now while it runs; none for cancelled jobs), so a window that
  covers the job's life gives the optimizer's ``w_j · τ_j`` and periods add up.
- GPU-hours = Σ attempts (end, or now while running, − start) × GPUs, clipped to the window.
"""
