"""The local script files a ``nodeSetup`` command runs: found, scanned for secrets, shipped.

A nodeSetup entry is a shell command (``bash setup.sh``, ``source env.sh && ./check.sh``) or a
bare script path (``setup.sh``). Every local file a command runs is read here: it must hold no
credential (as cluster.json itself), and it is copied into the job's code folder so that the
node finds it where the command names it (:func:`landcover.cluster.spec.check_setup_scripts`
scans them, :func:`landcover.cluster.azureml.writer.setup_commands` ships them).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Shells (and their builtins) whose first argument that is not an option is a script they run.
_INTERPRETERS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "source", "."})
# Words that end one simple command and start the next.
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})
_PREFIXES = frozenset({"sudo", "exec", "env", "time", "nohup", "command"})


@dataclass(frozen=True)
class SetupScript:
    """A local file a nodeSetup command runs.

    Attributes:
        named: The path as the command names it (relative to the job's working folder).
        path: The file on this machine (relative paths are relative to cluster.json's folder).
    """

    named: str
    path: Path


def _commands(command: str) -> list[list[str]]:
    """The simple commands of a shell command line, as word lists (quotes removed)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError as exc:  # an unclosed quote
        raise ValueError(f"nodeSetup command {command!r}: {exc}") from None
    commands: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _program(word: str) -> str:
    """A command word's program name: ``/bin/bash`` is ``bash`` (``.`` stays ``.``)."""
    return word.rsplit("/", 1)[-1]


def _run_files(words: list[str]) -> list[str]:
    """The words of one simple command that name a file it runs (or ``-c`` commands it runs)."""
    while words and (("=" in words[0] and not words[0].startswith("=")) or words[0] in _PREFIXES):
        words = words[1:]  # VAR=value assignments, sudo, env, ...
    if not words:
        return []
    program, args = words[0], words[1:]
    if _program(program) in _INTERPRETERS:
        for index, arg in enumerate(args):
            if arg == "-c" and index + 1 < len(args):  # bash -c 'bash x.sh'
                return [f"-c {args[index + 1]}"]
            if not arg.startswith("-"):
                return [arg]
        return []
    return [program] if "/" in program else []


def setup_scripts(command: str, cluster_dir: Path) -> list[SetupScript]:
    """The local script files one nodeSetup entry runs.

    Args:
        command: The entry: a shell command, or a bare script path.
        cluster_dir: cluster.json's folder (relative paths are relative to it).

    Returns:
        Each file the command runs that exists on this machine (``bash x.sh``, ``sh x.sh``,
        ``source x.sh``, ``. x.sh``, ``./x.sh``, ``bash -c '...'`` and a bare ``x.sh``, which
        the job runs as ``bash NAMED``), in order, each once.

    Raises:
        ValueError: A command that runs a relative script that is not there, or one
            outside cluster.json's folder (the job could not find it), or a command that
            is not shell words (an unclosed quote).
    """
    bare = command.strip()
    if bare and " " not in bare and (cluster_dir / bare).is_file():  # a bare script path
        path = (cluster_dir / bare).resolve()
        inside = not PurePosixPath(bare).is_absolute() and ".." not in PurePosixPath(bare).parts
        return [SetupScript(bare if inside else path.name, path)]
    found: list[SetupScript] = []
    for simple in _commands(command):
        for named in _run_files(simple):
            if named.startswith("-c "):
                found += setup_scripts(named[3:], cluster_dir)
                continue
            found += _local_file(command, named, cluster_dir, script=_program(simple[0]))
    unique = {s.named: s for s in found}
    return list(unique.values())


def _local_file(command: str, named: str, cluster_dir: Path, script: str) -> list[SetupScript]:
    """The local file a command names, if it is one the job needs shipped."""
    if PurePosixPath(named).is_absolute() or named.startswith("~") or "$" in named:
        return []  # a path on the node (or the shell's to expand)
    path = cluster_dir / named
    if ".." in PurePosixPath(named).parts:
        raise ValueError(
            f"nodeSetup command {command!r} runs {named}, outside cluster.json's folder: put "
            "the script beside cluster.json (it is copied into the job's code folder)"
        )
    if not path.is_file():
        if script in _INTERPRETERS or "/" in named:
            raise ValueError(
                f"nodeSetup command {command!r} runs {named}, which is not a file in "
                f"{cluster_dir} (script paths are relative to cluster.json's folder)"
            )
        return []
    return [SetupScript(named, path)]
