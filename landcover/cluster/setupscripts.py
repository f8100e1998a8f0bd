"""The local script files a ``nodeSetup`` command runs: found, scanned for secrets, shipped.

A nodeSetup entry is a shell command (``bash setup.sh``, ``source env.sh && ./check.sh``) or a
bare script path (``setup.sh``). Every local file a command runs is read here: it must hold no
credential (as cluster.json itself), and it is copied into the job's code folder so that the
node finds it where the command names it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from landcover.cluster.spec import NO_SECRETS_HINT, ClusterError, ClusterSpec, secret_in_text

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
        raise ClusterError(f"nodeSetup command {command!r}: {exc}") from None
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
        ClusterError: A command that runs a relative script that is not there, or one
            outside cluster.json's folder (the job could not find it).
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
        raise ClusterError(
            f"nodeSetup command {command!r} runs {named}, outside cluster.json's folder: put "
            "the script beside cluster.json (it is copied into the job's code folder)"
        )
    if not path.is_file():
        if script in _INTERPRETERS or "/" in named:
            raise ClusterError(
                f"nodeSetup command {command!r} runs {named}, which is not a file in "
                f"{cluster_dir} (script paths are relative to cluster.json's folder)"
            )
        return []
    return [SetupScript(named, path)]


def check_setup_scripts(cluster: ClusterSpec, cluster_dir: Path) -> list[SetupScript]:
    """Finds every local script cluster.json's nodeSetup runs and scans each for secrets.

    Args:
        cluster: cluster.json.
        cluster_dir: cluster.json's folder.

    Returns:
        The scripts, each once.

    Raises:
        ClusterError: A script holds what looks like a credential, or a command runs a
            script that is missing or outside cluster.json's folder.
    """
    scripts: dict[str, SetupScript] = {}
    for item in cluster.node_setup:
        for script in setup_scripts(item, cluster_dir):
            try:
                text = script.path.read_text(errors="replace")
            except OSError as exc:
                raise ClusterError(
                    f"nodeSetup script {script.path}: cannot read it ({exc.strerror})"
                ) from None
            what = secret_in_text(text)
            if what:
                raise ClusterError(
                    f"nodeSetup script {script.path} holds {what}; {NO_SECRETS_HINT}"
                )
            scripts.setdefault(script.named, script)
    return list(scripts.values())
