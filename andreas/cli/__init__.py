"""The ``andreas`` command: thin subcommands that parse, call the library and print.

``root`` holds the group and the optimizer commands (``decide``, ``evaluate``, ``costs``
...); one module per area adds its commands: ``db``, ``jobs`` (submit, queue, show,
cancel, logs), ``manager``, ``node``, ``profile``, ``report``, ``sim``, ``trace``;
``common`` holds what they share.
"""

from andreas.cli.root import main

__all__ = ["main"]
