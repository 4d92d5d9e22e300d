"""Write docs/CLI.md from the ``--help`` of every command: ``python -m fscore_lite.docgen > docs/CLI.md``.

The reference is generated, never edited by hand, so it cannot drift from the code;
tests/test_docgen.py fails when the committed file is stale (``make docs`` rewrites it).
"""
from __future__ import annotations

import sys

WIDTH = 100  # fixed, so the text does not depend on the terminal that runs this

HEADER = """# Command-line reference

Generated from the `--help` of every command by `make docs`
(`python -m fscore_lite.docgen > docs/CLI.md`); do not edit by hand.

At a glance:

```sh
fscore-lite score bios.jsonl -o out/bios.jsonl            # FActScore with the trained verifier (default)
fscore-lite score bios.jsonl --verifier llm               # the reference's LM judge, parity prompts
fscore-lite score bios.jsonl --verifier llm --mode shared-context   # LM judge, one context per response
fscore-lite q2 responses.csv -o out/q2.jsonl              # Q² (CSV or JSONL with response, knowledge)
fscore-lite report out/bios.jsonl -o report.html          # one self-contained HTML file
fscore-lite kb build pages.jsonl -o STORE                 # passage store from JSONL / FActScore DB / TSV
fscore-lite kb info STORE ; fscore-lite kb search STORE "query" --title "Page"
fscore-lite models list | verify | install-default [1.5b 0.5b minilm]
fscore-lite models export ROLE CHECKPOINT_DIR -o BUNDLE    # build step: HF checkpoint → int8 ONNX / GGUF
fscore-lite models train verifier                         # build step: train the default verifier
fscore-lite models train llm-combiner --llm NAME          # build step: fit --verifier llm+trained for that LLM
fscore-lite meta-eval factscore-er --verifier trained --cv 5  # its error rate on held-out topics
fscore-lite meta-eval q2 --limit 20
fscore-lite cache info ; fscore-lite cache prune --older-than DAYS --model NAME
fscore-lite doctor                                        # what is installed, what is missing
```
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

    from .cli import app

    root = typer.main.get_command(app)
    parts = [HEADER]
    for path, command in _walk(root, ["fscore-lite"]):
        parts.append(f"\n## `{' '.join(path)}`\n\n```text\n{_help(command, path)}```\n")
    return "".join(parts)


def main() -> None:
    sys.stdout.write(cli_reference())


if __name__ == "__main__":
    main()
