"""The closed set of rescheduling triggers, one owner for the manager's rooms.

A ``StrEnum``: a trigger is logged and stored (``decisions.trigger``, several joined by
``+``) as the same text it always was.
"""

from __future__ import annotations

import enum


class Trigger(enum.StrEnum):
    """Why the manager plans again (docs/design/manager.md, "Rescheduling")."""

    SUBMIT = "submit"          # a job waits that the target does not cover
    COMPLETE = "complete"      # a job completed
    FAILED = "failed"          # an attempt failed or could not start
    NODE_DOWN = "node-down"    # a node (or some of its GPUs) stopped being usable
    NODE_UP = "node-up"        # a node (or some of its GPUs) became usable
    PERIOD = "period"          # the period H elapsed
    START = "start"            # the daemon started
    PROFILE = "profile"        # the automatic profiling changed what it wants
    REVISIT = "revisit"        # the target's revisit time came (Plan.revisit_s)
