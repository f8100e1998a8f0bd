"""Writes the command-line reference from the typer application in ``landcover.cli``.

Run by the ``gen-files`` plugin at build time. It turns the typer app into its click command
with ``typer.main.get_command`` and walks every command and sub-command, writing the usage
line and each argument and option as the command's own ``--help`` formats it (click's help
records: flags, type, default, range), so a new command or option shows up without editing a
page.
"""

from __future__ import annotations

import html
import re
from typing import Any

import mkdocs_gen_files
import typer

from landcover.cli import app

PAGE = "reference/cli.md"
PROGRAM = "landcover"
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]#|])")


def escape(text: str) -> str:
    """Help text made literal for Markdown (no emphasis, links, attributes or HTML).

    Args:
        text: Plain help text.

    Returns:
        The text, escaped.
    """
    return MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def paragraphs(text: str) -> list[str]:
    """A command's help text as escaped Markdown paragraphs.

    Args:
        text: The help text (paragraphs separated by blank lines).

    Returns:
        One line per paragraph.
    """
    return [escape(" ".join(block.split())) for block in text.split("\n\n") if block.strip()]


def parameter_rows(command: Any, ctx: typer.Context) -> list[str]:
    """The Markdown table of a command's arguments and options.

    Args:
        command: The click command.
        ctx: Its context.

    Returns:
        The table's lines (empty when the command takes nothing).
    """
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:  # hidden
            continue
        names, help_text = record
        kind = "argument" if param.param_type_name == "argument" else "option"
        rows.append(f"| `{names}` | {kind} | {escape(' '.join(help_text.split()))} |")
    if not rows:
        return []
    return ["| Flags | Kind | Description |", "| --- | --- | --- |", *rows]


def command_markdown(command: Any, ctx: typer.Context, level: int) -> list[str]:
    """A command's section and those of its sub-commands, depth first.

    Args:
        command: The click command (or group).
        ctx: Its context (its ``command_path`` is the command line that runs it).
        level: The Markdown heading level of this command.

    Returns:
        Markdown lines.
    """
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines = [f"{'#' * level} `{ctx.command_path}`", ""]
    lines += [line for paragraph in paragraphs(command.help or "") for line in (paragraph, "")]
    lines += ["```console", f"$ {usage}", "```", ""]
    table = parameter_rows(command, ctx)
    lines += [*table, ""] if table else []
    names = command.list_commands(ctx) if hasattr(command, "list_commands") else []
    subcommands = [(name, command.get_command(ctx, name)) for name in names]
    subcommands = [(name, sub) for name, sub in subcommands if sub is not None and not sub.hidden]
    if subcommands:
        lines += ["Commands:", ""]
        for name, sub in subcommands:
            short = sub.get_short_help_str(limit=120)
            lines.append(f"- [`{name}`](#{slug(f'{ctx.command_path} {name}')}): {escape(short)}")
        lines.append("")
    for name, sub in subcommands:
        sub_ctx = typer.Context(sub, info_name=name, parent=ctx)
        lines += command_markdown(sub, sub_ctx, min(level + 1, 6))
    return lines


def slug(command_path: str) -> str:
    """The heading anchor MkDocs gives a command's section.

    Args:
        command_path: E.g. ``landcover data synth``.

    Returns:
        E.g. ``landcover-data-synth``.
    """
    return command_path.replace(" ", "-")


def page() -> str:
    """The whole command-line reference page.

    Returns:
        Markdown.
    """
    command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name=PROGRAM)
    intro = [
        "# Command-line reference",
        "",
        "Every `landcover` command, argument and option, generated from the typer application "
        "in `landcover/cli.py` when the site is built; `landcover COMMAND --help` prints the "
        "same. The [quick tour](../getting-started.md#a-quick-tour) shows them at work.",
        "",
    ]
    body = command_markdown(command, ctx, 2)
    return "\n".join(intro + body).rstrip() + "\n"


with mkdocs_gen_files.open(PAGE, "w") as out:
    out.write(page())
