"""One rich console policy for every command's tables."""

from __future__ import annotations


def console():
    """A terminal's own width; 120 columns when piped, so tables are not squeezed."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=120)
