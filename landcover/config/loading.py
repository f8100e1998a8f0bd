"""Loading a configuration: YAML files with includes, flags and ``--set`` overrides, blame."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from landcover.config.root import Config
from landcover.config.run import RunConfig
from landcover.config.yamlfile import DuplicateKeyError, load_yaml, yaml_problem
from landcover.errors import ConfigError, first_line


def _format_validation_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{source}: {where + ': ' if where else ''}{message}{more}"


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {dotted}: {key} is not a section")
    node[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """Parses a ``section.key=value`` override; the value is read as YAML.

    Args:
        text: The override, e.g. ``optim.lr=0.01`` or ``model.decoder_channels=[64,32,16]``.

    Returns:
        The dotted key and the parsed value.

    Raises:
        ConfigError: If the text has no ``=`` or its value is not valid YAML.
    """
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    key, raw = text.split("=", 1)
    try:
        return key.strip(), load_yaml(raw)
    except DuplicateKeyError as exc:
        raise ConfigError(f"--set {key.strip()}: key {exc.key!r} appears twice") from None
    except yaml.YAMLError as exc:
        problem = yaml_problem(exc).removeprefix("line 1, ")
        raise ConfigError(f"--set {key.strip()}: the value is not valid YAML: {problem}") from None


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Merges two config trees: sections merge key by key, any other value of ``over`` wins.

    Args:
        base: The lower layer.
        over: The upper layer (its keys win; lists replace lists whole).

    Returns:
        A new merged tree (the inputs are not changed).
    """
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path, what: str) -> dict[str, Any]:
    try:
        loaded = load_yaml(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except DuplicateKeyError as exc:
        raise ConfigError(
            f"{path}: line {exc.line}: key {exc.key!r} appears twice in the same section (first "
            f"on line {exc.first}); YAML allows a key once: remove one"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {yaml_problem(exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable YAML file ({exc.__class__.__name__})") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: a config file must be a YAML mapping")
    return loaded or {}


@dataclass
class ConfigTree:
    """A config file read with its includes merged, before validation.

    Attributes:
        tree: The merged keys (``include`` removed).
        includes: Every file included, directly or by an included file.
    """

    tree: dict[str, Any]
    includes: list[Path] = field(default_factory=list)


def read_config_tree(path: str | Path) -> ConfigTree:
    """Reads a config file with its ``include:`` files merged under its own keys.

    ``include`` is a path or a list of paths, relative to the including file's folder; they
    are merged in order (a later one wins over an earlier one), then the file's own keys win
    over all of them. Included files may include others; a cycle is an error.

    Args:
        path: The config file.

    Returns:
        The merged tree and the files it included.

    Raises:
        ConfigError: If a file is missing or unreadable, or an include is malformed or circular.
    """
    includes: list[Path] = []
    tree = _merge_includes(Path(path), (), "config file", includes)
    return ConfigTree(tree, includes)


def _merge_includes(path: Path, chain: tuple[Path, ...], what: str, seen: list[Path]) -> dict:
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symbolic link loop (RuntimeError before 3.13)
        raise ConfigError(f"{path}: cannot be read ({first_line(exc)})") from None
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ConfigError(f"{path}: include cycle ({cycle})")
    tree = _read_yaml(path, what)
    includes = tree.pop("include", None)
    if includes is None:
        return tree
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ConfigError(f"{path}: include must be a file path or a list of file paths")
    base: dict[str, Any] = {}
    for name in includes:
        included = path.parent / Path(name).expanduser()
        seen.append(included)
        layer = _merge_includes(included, (*chain, resolved), f"file included by {path}", seen)
        base = deep_merge(base, layer)
    return deep_merge(base, tree)


def run_settings(source: str = "options", **values: Any) -> RunConfig:
    """A validated ``run`` section from command-line values (for commands other than train).

    Args:
        source: Named in error messages (the command).
        **values: ``run`` keys; ``None`` values keep their defaults.

    Returns:
        The settings (workers, nodes, rendezvous, device).

    Raises:
        ConfigError: If they are inconsistent (say, several nodes and no rendezvous endpoint).
    """
    try:
        return RunConfig.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def flag_name(key: str) -> str:
    """The command-line flag that sets a dotted key unless told otherwise.

    Args:
        key: A dotted config key, e.g. ``optim.batch_size``.

    Returns:
        The flag as typer spells it, e.g. ``--batch-size``.
    """
    return "--" + key.rsplit(".", 1)[-1].replace("_", "-")


@dataclass(frozen=True)
class _Override:
    """One value set on the command line: its dotted key, value and how the user wrote it."""

    key: str
    value: Any
    origin: str

    def sets(self, loc: list[str]) -> bool:
        """Whether this override decides the value at ``loc`` (its key is ``loc`` or above)."""
        return self.key.split(".") == loc[: self.key.count(".") + 1]

    def within(self, loc: list[str]) -> bool:
        """Whether this override sets a value inside the section at ``loc``."""
        return self.key.split(".")[: len(loc)] == loc


def _problems(tree: dict[str, Any]) -> set[tuple[tuple[str, ...], str]]:
    """The (location, message) of each validation problem of a tree (empty when valid)."""
    try:
        Config.model_validate(tree)
    except ValidationError as err:
        return {(tuple(str(p) for p in e["loc"]), e["msg"]) for e in err.errors()}
    return set()


def _blame(
    err: ValidationError,
    source: str,
    layers: list[_Override],
    build: Callable[[set[int]], dict[str, Any]],
) -> str:
    """Names where the first problem of ``err`` came from: a flag, a ``--set`` or the file.

    A problem at or under a key set on the command line is that flag's (the last one to set
    it). A problem of a whole section (``decoder_channels needs 5 values``) is blamed on the
    command-line values in it without which it goes away, else on ``source``.
    """
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    problem = (tuple(loc), first["msg"])
    for layer in reversed(layers):
        if layer.sets(loc):
            return layer.origin
    inside = [i for i, layer in enumerate(layers) if layer.within(loc)]
    culprits = [i for i in inside if problem not in _problems(build({i}))]
    if not culprits and inside and problem not in _problems(build(set(inside))):
        culprits = inside
    if culprits:
        return ", ".join(layers[i].origin for i in culprits)
    return source


def load_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    sets: list[str] | None = None,
    flags: dict[str, str] | None = None,
) -> Config:
    """Loads and validates a configuration.

    A config file may say ``include: FILE`` (or a list of files), relative to its own folder:
    the included files are merged under the file's own keys (see :func:`read_config_tree`), so a
    statistics file written by ``landcover data stats`` can supply ``data.mean`` and the
    like. Command-line overrides win over both.

    An invalid value is blamed on where it came from: a flag (``--epochs -3: optim.epochs:
    ...``), a ``--set`` (``--set optim.lr=0: optim.lr: ...``) or the config file
    (``configs/cpu.yaml: optim.epochs: ...``).

    Args:
        path: A YAML config file, or ``None`` for the built-in defaults.
        overrides: Dotted keys to values (from CLI flags); ``None`` values are skipped.
        sets: ``section.key=value`` strings (from ``--set``), applied last.
        flags: The flag that sets a key of ``overrides``, where it is not the one
            :func:`flag_name` derives (e.g. ``{"data.root": "--data"}``).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: If a file is missing or unreadable, an include is malformed or circular,
            or the result is invalid (named as the flag, ``--set`` or file it came from).
    """
    base: dict[str, Any] = {}
    source = "config"
    if path is not None:
        source = str(path)
        base = read_config_tree(path).tree
    layers: list[_Override] = []
    for key, value in (overrides or {}).items():
        if value is not None:
            flag = (flags or {}).get(key) or flag_name(key)
            shown = str(value).lower() if isinstance(value, bool) else value
            layers.append(_Override(key, value, f"{flag} {shown}"))
    for text in sets or []:
        key, value = parse_override(text)
        layers.append(_Override(key, value, f"--set {text}"))

    def build(skip: set[int]) -> dict[str, Any]:
        tree = copy.deepcopy(base)
        for i, layer in enumerate(layers):
            if i not in skip:
                _set_dotted(tree, layer.key, layer.value)
        return tree

    try:
        return Config.model_validate(build(set()))
    except ValidationError as err:
        raise ConfigError(
            _format_validation_error(err, _blame(err, source, layers, build))
        ) from None


def config_from_dict(
    tree: dict[str, Any], source: str = "checkpoint", any_arch: bool = False
) -> Config:
    """Validates a configuration stored as plain data (in a checkpoint or run folder).

    Args:
        tree: The configuration as produced by :meth:`Config.to_dict`.
        source: Where it came from, for the error message.
        any_arch: Take a ``model.arch`` no one registered here (an exported model's: ONNX
            Runtime runs it without the plugin that built it).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: If the data is not a valid configuration.
    """
    try:
        return Config.model_validate(tree, context={"any_arch": any_arch})
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def save_config(config: Config, path: Path) -> None:
    """Writes the resolved configuration as YAML (atomically).

    Args:
        config: The configuration.
        path: Destination file.
    """
    from landcover.fileio import atomic_write_text
    from landcover.redaction import redact_tree

    text = yaml.safe_dump(redact_tree(config.to_dict()), sort_keys=False)
    atomic_write_text(path, text)
