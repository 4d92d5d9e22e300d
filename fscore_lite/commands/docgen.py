"""Write docs/CLI.md from the ``--help`` of every command: ``python -m fscore_lite.commands.docgen > docs/CLI.md``.

The reference is generated, never edited by hand, so it cannot drift from the code;
tests/test_docgen.py fails when the committed file is stale (``make docs`` rewrites it).
"""
from __future__ import annotations

import sys

WIDTH = 100  # fixed, so the text does not depend on the terminal that runs this

HEADER = """# Command-line reference

Generated from the `--help` of every command by `make docs`
(`python -m fscore_lite.commands.docgen > docs/CLI.md`); do not edit by hand.
"""


def _help(command, path: list[str]) -> str:
    """The plain (click, not rich) help text of one command, as `fscore-lite PATH --help` shows it."""
    # the command's own Context class: typer ships its own copy of click
    ctx = command.context_class(command, info_name=" ".join(path), terminal_width=WIDTH, max_content_width=WIDTH)
    formatter = ctx.make_formatter()
    # typer's plain (click) layout: its rich panels would put box drawings and colour codes in the file
    mode = getattr(command, "rich_markup_mode", None)
    command.rich_markup_mode = None
    try:
        command.format_help(ctx, formatter)
    finally:
        command.rich_markup_mode = mode
    return formatter.getvalue().rstrip() + "\n"


def _walk(command, path: list[str]):
    yield path, command
    if hasattr(command, "list_commands"):  # a group
        ctx = command.context_class(command)
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, [*path, name])


def cli_reference() -> str:
    """docs/CLI.md: a section per command and subcommand, each its `--help` text."""
    import typer

    from ..cli import app

    root = typer.main.get_command(app)
    parts = [HEADER]
    for path, command in _walk(root, ["fscore-lite"]):
        parts.append(f"\n## `{' '.join(path)}`\n\n```text\n{_help(command, path)}```\n")
    return "".join(parts)


def main() -> None:
    sys.stdout.write(cli_reference())


if __name__ == "__main__":
    main()
