"""``python -m fscore_lite_models ...`` (this folder, models/, is installed as ``fscore_lite_models``):
the same commands as ``fscore-lite models ...``."""
from __future__ import annotations

import sys

import typer

from fscore_lite.commands.models import app
from fscore_lite.errors import FscoreError


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="python -m fscore_lite_models", standalone_mode=True)
    except FscoreError as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
