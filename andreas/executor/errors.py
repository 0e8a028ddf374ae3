"""The executor's exceptions: Docker SDK errors are translated once, here, at the boundary.

A failed container is not an exception of the manager: it is a stored outcome (the exit
code and the tail of its log). These classes are for what the executor could not do.
"""

from __future__ import annotations

from andreas.errors import AndreasError


class ExecutorError(AndreasError):
    """The executor could not do what was asked (the message names node and container)."""


class NodeUnreachable(ExecutorError):
    """The node's Docker endpoint does not answer: the node is down for the manager."""


class EngineUnavailable(NodeUnreachable):
    """The cluster's engine itself did not answer (the Slurm controller down or its
    commands missing or hanging): nothing is known about the node, which is not thereby
    down. The manager leaves such a node alone for the tick; a start that meets it is
    replanned without counting a failure."""


class StartUncertain(ExecutorError):
    """A start request may or may not have taken effect (the engine's answer timed out):
    the attempt stays open and the next look at the node adopts its run or finds none."""


class ImageNotFound(ExecutorError):
    """The image is neither on the node nor pullable: the job fails with this reason."""


class ImagePullFailed(ExecutorError):
    """The node lacks the image and the pull failed for a reason that may pass (registry
    unreachable, timeout, server error): the job waits and the pull is retried; the
    manager fails it only after ``[manager] image_pull_grace_s``."""


class ImageNotAllowed(ExecutorError):
    """The image matches no pattern of ``[executor] image_allowlist``."""


class ContainerConflict(ExecutorError):
    """A container with the attempt's name exists already (started before a crash)."""
