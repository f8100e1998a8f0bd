"""Usage errors of every command as one ``error:`` line (the CLI's one handler for them).

typer (which carries its own copy of click: its errors derive from
:class:`typer.TyperException`, not from ``click.ClickException``) lays a usage error out as a usage line, a hint and a boxed message, five lines or
more with no ``error:`` on any. The CLI runs typer with ``standalone_mode=False`` instead, so
that click's exceptions reach :func:`run_app`, which prints each as
``error: MESSAGE; try 'landcover COMMAND --help'`` and exits with click's code (2 for a usage
error), whatever command raised it.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from landcover import redaction

PROG_NAME = "landcover"


def usage_line(exc: typer.TyperException) -> str:
    """The one line that reports a click error.

    Args:
        exc: A usage error (bad option value, unknown option or command, missing argument)
            or another click error.

    Returns:
        ``error: MESSAGE``, with a hint to the failing command's ``--help`` for a usage
        error; redacted (a usage error quotes what was typed).
    """
    message = " ".join(exc.format_message().split()).rstrip(".")  # one line, however wrapped
    line = f"error: {message}"
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:  # a usage error (click's UsageError and BadParameter carry one)
        line += f"; try '{ctx.command_path} --help'"
    return redaction.redact(line)


def run_app(app: Any) -> None:
    """Runs the typer app; a usage error is one ``error:`` line and exit code 2.

    Args:
        app: The typer application.

    Raises:
        SystemExit: Always: the command's exit code (0 when it returned normally).
    """
    try:
        code = app(standalone_mode=False, prog_name=PROG_NAME)
    except typer.TyperException as exc:
        if type(exc).__name__ != "NoArgsIsHelpError":  # (a bare group: typer showed its help)
            print(usage_line(exc), file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
