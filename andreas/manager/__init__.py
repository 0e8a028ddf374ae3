"""The Job Manager: snapshot -> policy -> decision (the target), and reconciliation of the
nodes' containers towards it (ARCHITECTURE.md, "The Job Manager").

Modules: ``estimates`` (epoch times and power curves with their sources), ``state``
(the store as plain views), ``snapshot`` (store -> optimizer snapshot), ``plandoc`` (the
decision's plan document and the target), ``reconcile`` (ticks), ``manager``
(:class:`Manager`), ``loop`` (the daemon loop with the period timer), ``lock`` (one
manager at a time), ``daemon`` (``andreas manager run``).
"""

from andreas.manager.manager import Manager, TickReport

__all__ = ["Manager", "TickReport"]
