"""Brings documents that live beside the code into the site (mkdocs-gen-files).

Run by the ``gen-files`` plugin at build time: ``benchmarks/README.md`` (kept next to the
benchmarks it describes) becomes the page ``benchmarks/suite.md``, and the figures the pages
show are copied from ``benchmarks/results/``, so neither is duplicated under ``docs/``.
"""

from __future__ import annotations

from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[2]
COPIES = {
    "benchmarks/README.md": "benchmarks/suite.md",
    "benchmarks/results/scaling_model.png": "benchmarks/scaling_model.png",
}
"""Source files (relative to the repository) and their paths in the site."""


def copy(source: Path, dest: str) -> None:
    """Writes a file into the site's virtual docs folder.

    Args:
        source: The file in the repository.
        dest: Its path in the site, relative to ``docs/``.
    """
    with mkdocs_gen_files.open(dest, "wb") as out:
        out.write(source.read_bytes())
    if dest.endswith(".md"):
        mkdocs_gen_files.set_edit_path(dest, source.relative_to(ROOT))


for source, dest in COPIES.items():
    copy(ROOT / source, dest)
