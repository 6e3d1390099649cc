"""MkDocs hook: the command-line reference page (``reference/cli.md``), generated at build
time from the ``paretosearch`` argparse parsers, so it cannot fall behind the code."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

PAGE = "reference/cli.md"
INTRO = """# Command line

Every `paretosearch` subcommand with its options, as `paretosearch COMMAND --help` prints
them. This page is generated from the parsers when the site is built.
"""


def cli_reference() -> str:
    """The page's Markdown: the top-level help, then each subcommand's."""
    os.environ["COLUMNS"] = "100"  # argparse wraps help text to the terminal's width
    from paretosearch.cli.main import _parser

    parser = _parser()
    parts = [INTRO, "```text", parser.format_help().rstrip(), "```"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                parts += [f"\n## `paretosearch {name}`\n", "```text",
                          sub.format_help().rstrip(), "```"]
    return "\n".join(parts) + "\n"


def on_files(files: Files, config: Any) -> Files:
    """Add the generated page to the site (from this checkout's code, not an installed
    copy's)."""
    sys.path.insert(0, str(Path(config.config_file_path).parent))
    files.append(File.generated(config, PAGE, content=cli_reference()))
    return files
