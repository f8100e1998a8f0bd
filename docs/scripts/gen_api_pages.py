"""Writes one API reference page per module of the ``landcover`` package (mkdocs-gen-files).

Run by the ``gen-files`` plugin at build time: it walks ``landcover/`` on disk, so a module
that is added, moved or renamed gets its page (and its place in the navigation) without any
page being edited. Each page is a mkdocstrings ``::: module`` block; ``SUMMARY.md`` is the
navigation that ``literate-nav`` reads.
"""

from __future__ import annotations

from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "landcover"
PAGES = Path("reference/api")


def module_parts(path: Path) -> tuple[str, ...] | None:
    """The dotted parts of a source file's module, or ``None`` for files without a page.

    Args:
        path: A ``.py`` file under the package.

    Returns:
        E.g. ``("landcover", "data", "raster")``; a package's ``__init__.py`` gives the
        package's parts; ``__main__.py`` and private modules (``_name.py``) give ``None``.
    """
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[-1] == "__main__" or any(part.startswith("_") for part in parts):
        return None
    return parts


def page_path(parts: tuple[str, ...], is_package: bool) -> Path:
    """Where a module's page goes, relative to the API reference folder.

    Args:
        parts: The module's dotted parts.
        is_package: Whether the module is a package (its page is the folder's ``index.md``).

    Returns:
        E.g. ``landcover/data/raster.md`` or ``landcover/data/index.md``.
    """
    if is_package:
        return Path(*parts, "index.md")
    return Path(*parts).with_suffix(".md")


def main() -> None:
    """Writes the module pages and their navigation."""
    nav = mkdocs_gen_files.Nav()
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = module_parts(path)
        if parts is None:
            continue
        page = page_path(parts, path.name == "__init__.py")
        nav[parts] = page.as_posix()
        with mkdocs_gen_files.open(PAGES / page, "w") as out:
            out.write(f"::: {'.'.join(parts)}\n")
        mkdocs_gen_files.set_edit_path(PAGES / page, path.relative_to(ROOT))
    with mkdocs_gen_files.open(PAGES / "SUMMARY.md", "w") as out:
        out.writelines(nav.build_literate_nav())


main()
