"""Container engines: the Docker SDK boundary (``docker.py``), a dry-run recorder
(``dryrun.py``) and the interface the manager programs against (``base.py``)."""

from andreas.executor.base import ContainerState, Executor, NodeRef, StartRequest, container_name
from andreas.executor.errors import (ContainerConflict, ExecutorError, ImageNotAllowed,
                                     ImageNotFound, NodeUnreachable)

__all__ = ["ContainerConflict", "ContainerState", "Executor", "ExecutorError",
           "ImageNotAllowed", "ImageNotFound", "NodeRef", "NodeUnreachable", "StartRequest",
           "container_name"]
