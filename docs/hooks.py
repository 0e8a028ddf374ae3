"""mkdocs hooks of the documentation site (mkdocs.yml names this file).

- The CLI reference: `andreas` imports each family of commands only when one of them is
  asked for (`andreas/cli/root.py`), and mkdocs-click lists a group's `commands` as they
  are; loading them all first puts every command in the reference.
- ARCHITECTURE.md and CHANGELOG.md live at the repository's root, where people read them
  first; the site shows them as its own pages, with their links into `docs/` made
  relative to the site.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parent.parent
# Root file -> the page the site shows it as.
ROOT_PAGES = {"ARCHITECTURE.md": "architecture.md", "CHANGELOG.md": "changelog.md"}
_DOCS_LINK = re.compile(r"\]\(docs/")


def on_config(config: Any) -> Any:
    from andreas.cli.root import main

    main.list_commands(click.Context(main))
    return config


def on_files(files: Files, config: Any) -> Files:
    from mkdocs.structure.files import File   # here: tests load this module without mkdocs

    for source, page in ROOT_PAGES.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=_DOCS_LINK.sub("](", text)))
    return files
