"""Reading YAML strictly: a key named twice in a mapping is an error, not "the last wins".

YAML forbids a mapping with a key twice, but PyYAML's ``safe_load`` keeps the last value
without a word: a config file with two ``lr:`` lines under ``optim`` trained with one of them
silently (issue 42, item 10). Config files and ``--set`` values are read here instead.
"""

from __future__ import annotations

from typing import Any

import yaml


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of a YAML document names a key twice (YAML forbids it).

    Args:
        key: The key.
        line: The 1-based line of its second appearance.
        first: The 1-based line of its first appearance.
    """

    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(f"line {line}: duplicate key {key!r} (first on line {first})")
        self.key, self.line, self.first = key, line, first


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names a key twice (issue 42, item 10).

    A merge key (``<<: *defaults``) may still be overridden by the mapping's own keys.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Builds a mapping after checking that its own keys are unique.

        Args:
            node: The mapping's node.
            deep: Build nested values now (PyYAML's argument).

        Returns:
            The mapping.

        Raises:
            DuplicateKeyError: If a key appears twice.
        """
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise DuplicateKeyError(key, line, seen[key])
                    seen[key] = line
                except TypeError:  # an unhashable key: PyYAML's own error says so
                    continue
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """Parses YAML as ``yaml.safe_load`` does, but a key named twice in a mapping is an error.

    Args:
        text: The YAML text.

    Returns:
        The parsed data.

    Raises:
        DuplicateKeyError: If a mapping names a key twice.
        yaml.YAMLError: If the text is not YAML.
    """
    return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader: no Python objects


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and why a YAML text failed to parse, in one line (no quoted content).

    Args:
        exc: PyYAML's error.

    Returns:
        ``line L, column C: <problem> (<context>)`` for a parse error with a position (a tab
        in the indentation, an unclosed quote, a ``key: value`` under a plain scalar);
        otherwise the error's class name.
    """
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        context = f" ({exc.context})" if exc.context else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}{context}"
    return exc.__class__.__name__
