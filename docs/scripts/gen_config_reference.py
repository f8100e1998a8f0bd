"""Writes the configuration reference from the pydantic models of ``landcover.config``.

Run by the ``gen-files`` plugin at build time. It walks :class:`landcover.config.Config` and
every model nested in it (``data``, ``model``, ``optim``, ``optim.loss``, ``run``, the class
mapping), so a key added to a model shows up here without editing a page. Each key's
description is the field's ``description`` or, as the models write them, its entry in the
``Attributes:`` section of the model's Google-style docstring. A key with neither is logged
as a warning, which fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import html
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import annotated_types
import mkdocs_gen_files
from griffe import Docstring, DocstringSectionAttributes
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from landcover import config

PAGE = "reference/config.md"
LONG_DEFAULT = 60
"""Defaults longer than this many characters are folded away in the table."""

log = logging.getLogger("mkdocs.plugins.landcover.config_reference")

SPHINX_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|obj):`~?([^`]+)`")
CODE_SPAN = re.compile(r"(`+[^`]*?`+)")
BOUNDS = (
    (annotated_types.Ge, "ge", "≥"),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "≤"),
    (annotated_types.Lt, "lt", "<"),
)


@dataclass(frozen=True)
class Section:
    """A model to document and the dotted key it sits at.

    Attributes:
        key: The dotted key of the model's keys, e.g. ``optim.loss`` or
            ``data.classes.classes[]`` (``[]``: each item of a list).
        model: The pydantic model.
    """

    key: str
    model: type[BaseModel]


def nested_model(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The model a field holds, directly or as the items of a list.

    Args:
        annotation: A field's type.

    Returns:
        The model and the suffix its keys get (``""`` or ``"[]"``), or ``None``.
    """
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation) or (None,)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item, "[]"
    return None


def sections(root: type[BaseModel]) -> Iterator[Section]:
    """Every model under the root, depth first in field order (the root itself excluded).

    Args:
        root: The top-level model.

    Yields:
        The nested models with their dotted keys.
    """

    def walk(model: type[BaseModel], prefix: str) -> Iterator[Section]:
        for name, field in model.model_fields.items():
            found = nested_model(field.annotation)
            if found is not None:
                child, suffix = found
                key = f"{prefix}{name}{suffix}"
                yield Section(key, child)
                yield from walk(child, f"{key}.")

    yield from walk(root, "")


def type_text(annotation: Any) -> str:
    """A field's type as users write it in YAML terms: ``float | None``, ``'a' | 'b'``.

    Args:
        annotation: A field's type.

    Returns:
        The type, readable.
    """
    if annotation is None or annotation is type(None):
        return "None"
    if annotation is Any:
        return "Any"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(arg) for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(arg) for arg in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_text(arg) for arg in args)}]" if args else name
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def constraints_text(field: FieldInfo) -> str:
    """The field's numeric bounds and length limits, e.g. ``≥ 0, < 1``.

    Args:
        field: The field.

    Returns:
        The constraints, or an empty string.
    """
    found = []
    for item in field.metadata:
        for kind, attribute, symbol in BOUNDS:
            if isinstance(item, kind):
                found.append(f"{symbol} {getattr(item, attribute)}")
        if isinstance(item, annotated_types.MinLen):
            found.append(f"at least {items(item.min_length)}")
        if isinstance(item, annotated_types.MaxLen):
            found.append(f"at most {items(item.max_length)}")
    return ", ".join(found)


def items(count: int) -> str:
    """A count of list items in words: ``1 item``, ``2 items``.

    Args:
        count: The count.

    Returns:
        The words.
    """
    return f"{count} item" if count == 1 else f"{count} items"


def default_value(field: FieldInfo) -> tuple[bool, Any]:
    """The field's default as plain JSON data.

    Args:
        field: The field.

    Returns:
        Whether the field has a default (it is optional), and the default.
    """
    if field.is_required():
        return False, None
    try:
        value = field.get_default(call_default_factory=True)
    except TypeError:  # a factory that takes the validated data: nothing to show
        return True, "(computed)"
    if isinstance(value, BaseModel):
        return True, value.model_dump(mode="json")
    return True, json.loads(json.dumps(value, default=str))


def default_cell(field: FieldInfo, child: Section | None) -> str:
    """The table cell of a field's default.

    Args:
        field: The field.
        child: The key's own section when the key is a nested model.

    Returns:
        Markdown (or inline HTML for a long default, folded in ``<details>``).
    """
    has_default, value = default_value(field)
    if not has_default:
        return "*required*"
    if child is not None and value == model_defaults(child.model):
        return f"[its keys' defaults](#{anchor(child.key)})"
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= LONG_DEFAULT:
        return f"`{text}`" if "`" not in text else html.escape(text)
    return f"<details><summary>show</summary><code>{html.escape(text)}</code></details>"


def model_defaults(model: type[BaseModel]) -> Any:
    """A model built from its own defaults, as plain data.

    Args:
        model: The model.

    Returns:
        Its dump, or ``None`` when the model has required keys.
    """
    try:
        return model().model_dump(mode="json")
    except ValidationError:
        return None


def descriptions(model: type[BaseModel]) -> dict[str, str]:
    """The ``Attributes:`` entries of a model's Google-style docstring, by name.

    Args:
        model: The model.

    Returns:
        Each documented attribute's description.
    """
    if not model.__doc__:
        return {}
    parsed = Docstring(inspect.cleandoc(model.__doc__), parser="google").parse()
    return {
        item.name: item.description
        for section in parsed
        if isinstance(section, DocstringSectionAttributes)
        for item in section.value
    }


def summary(model: type[BaseModel]) -> str:
    """The first paragraph of a model's docstring.

    Args:
        model: The model.

    Returns:
        Its summary line(s), or an empty string.
    """
    doc = (model.__doc__ or "").strip()
    return " ".join(doc.split("\n\n", 1)[0].split()) if doc else ""


def cell(text: str) -> str:
    """Text made safe for one Markdown table cell.

    Args:
        text: Docstring text (Sphinx roles become code spans, lines are joined).

    Returns:
        The cell's Markdown.
    """
    text = " ".join(SPHINX_ROLE.sub(r"`\1`", text).split())
    # a pipe ends the cell unless it is in a code span (the table parser skips those)
    pieces = CODE_SPAN.split(text)
    return "".join(
        piece if piece.startswith("`") else piece.replace("|", "\\|") for piece in pieces
    )


def anchor(key: str) -> str:
    """The id under which a dotted key (or a section) can be linked: ``config.data.root``.

    Args:
        key: A dotted key.

    Returns:
        The anchor id, without ``#``.
    """
    return "config." + key.replace("[]", "")


def section_markdown(section: Section) -> str:
    """One section of the reference: a heading, the model's summary and a table of its keys.

    Args:
        section: The model and its dotted key.

    Returns:
        Markdown.
    """
    model = section.model
    qualified = f"{model.__module__}.{model.__qualname__}"
    lines = [
        f"## `{section.key}` {{#{anchor(section.key)}}}",
        "",
        f"{summary(model)} (model: [`{model.__qualname__}`][{qualified}])",
        "",
        "| Key | Type | Default | Constraints | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    documented = descriptions(model)
    for name, field in model.model_fields.items():
        key = f"{section.key}.{name}"
        found = nested_model(field.annotation)
        child = Section(f"{key}{found[1]}", found[0]) if found else None
        text = field.description or documented.get(name, "")
        if not text:
            log.warning(
                "config key %s has no description: document it under Attributes: in %s's "
                "docstring (or give the Field a description)",
                key,
                qualified,
            )
        if child is not None:
            text += f" See [`{child.key}`](#{anchor(child.key)})."
        # a key that is a section of its own is anchored at its section's heading
        key_cell = f"`{key}`" if child is not None else f"[](){{#{anchor(key)}}}`{key}`"
        lines.append(
            f"| {key_cell} | `{type_text(field.annotation)}` | "
            f"{default_cell(field, child)} | {constraints_text(field)} | {cell(text)} |"
        )
    return "\n".join(lines)


def page() -> str:
    """The whole configuration reference page.

    Returns:
        Markdown.
    """
    found = list(sections(config.Config))
    intro = [
        "# Configuration reference",
        "",
        "Every configuration key, generated from the pydantic models in "
        "`landcover/config/` when the site is built. The [configuration guide]"
        "(../guide/configs.md) explains how the keys work together.",
        "",
        cell((config.__doc__ or "").split("\n\n", 1)[-1]),
        "",
        "Set a key in a YAML file (`optim: {lr: 0.001}`) or on the command line "
        "(`--set optim.lr=0.001`); a nested key is dotted (`--set optim.loss.terms.dice=1`). "
        "*Default* is the model's own default, which applies when neither the config file "
        "nor the command line sets the key; the shipped configs in `configs/` set many keys.",
        "",
    ]
    body = [section_markdown(section) for section in found]
    return "\n".join(intro) + "\n" + "\n\n".join(body) + "\n"


with mkdocs_gen_files.open(PAGE, "w") as out:
    out.write(page())
