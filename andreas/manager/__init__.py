"""The Job Manager: snapshot -> policy -> decision (the target), and reconciliation of the
nodes' containers towards it (docs/design/manager.md).

Modules: ``estimates`` (epoch times and power curves with their sources), ``state``
(the store's read model at one instant), ``snapshot`` (store -> optimizer snapshot),
``plandoc`` (the decision's plan document, the target, and every read of stored plans),
``exits`` (a container's exit -> the job's outcome; the retry rule), ``reconcile``
(ticks), ``manager`` (:class:`Manager`), ``loop`` (the daemon loop with the period timer),
``lock`` (one manager at a time), ``daemon`` (``andreas manager run``). None of them
speaks SQL: every read and write goes through ``andreas.store``.
"""

from andreas.manager.manager import Manager, TickReport

__all__ = ["Manager", "TickReport"]
