"""One exception hierarchy for andreas; the CLI turns these into one-line messages."""

from __future__ import annotations


class AndreasError(Exception):
    """Base of every error andreas raises on purpose."""


class InputError(AndreasError, ValueError):
    """Bad user input: the message names the object, the field and the value."""


class InfeasiblePlan(AndreasError):
    """A plan that breaks a hard constraint (capacity, one node per job, unknown names)."""
