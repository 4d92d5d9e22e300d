"""The ``fscore-lite`` command line: a thin layer over the Python API.

Each command module in :mod:`fscore_lite.commands` parses flags and calls the API. Errors a
user can cause (:class:`FscoreError`) print one clear line and exit with status 2.
"""
from __future__ import annotations

import sys

import typer

from .commands import cache, kb, metaeval, models, q2, score
from .commands import report as report_cmd
from .commands import doctor as doctor_cmd
from .errors import FscoreError

app = typer.Typer(
    help="Offline FActScore and Q² on CPU, from a fixed knowledge snapshot and fixed model files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
score.register(app)
q2.register(app)
report_cmd.register(app)
doctor_cmd.register(app)
app.add_typer(kb.app, name="kb", help="Build and inspect passage stores.")
app.add_typer(models.app, name="models", help="Install, list, verify and export model bundles.")
app.add_typer(metaeval.app, name="meta-eval", help="Reproduce the papers' evaluations on annotated data.")
app.add_typer(cache.app, name="cache", help="Show the model-call cache's size and contents; prune it by age or model.")


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=True)
    except FscoreError as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted; rerun with --resume to continue", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
