"""Class mappings from Chesapeake land-cover label codes to training classes.

A mapping turns label codes (uint8 values in the label rasters) into class indices
``0..n-1``; codes listed as ignored (no-data) become :data:`IGNORE_INDEX`, which the loss and
the metrics skip. Codes that are neither mapped nor ignored are an error: they usually mean the
label file is not the edition the config expects.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field, field_validator, model_validator

IGNORE_INDEX = 255
"""Class index of pixels ignored by the loss and the metrics (no-data)."""


class ClassSpec(BaseModel):
    """One training class.

    Attributes:
        name: Short class name, used in metrics and map metadata.
        codes: Label codes that map to this class.
        color: Display colour as ``#rrggbb``.
    """

    name: str
    codes: list[int] = Field(min_length=1)
    color: str = "#808080"

    @field_validator("codes")
    @classmethod
    def _codes_in_range(cls, codes: list[int]) -> list[int]:
        for code in codes:
            if not 0 <= code <= 255:
                raise ValueError(f"label code {code} is outside 0..255")
        return codes

    @field_validator("color")
    @classmethod
    def _valid_color(cls, color: str) -> str:
        if len(color) != 7 or color[0] != "#":
            raise ValueError(f"colour {color!r} is not of the form #rrggbb")
        int(color[1:], 16)
        return color.lower()

    @property
    def rgb(self) -> tuple[int, int, int]:
        """The colour as an (r, g, b) tuple of 0..255 ints."""
        return (int(self.color[1:3], 16), int(self.color[3:5], 16), int(self.color[5:7], 16))


class ClassMapping(BaseModel):
    """A full mapping of label codes to training classes.

    Attributes:
        name: Name of the scheme (a preset name or ``custom``).
        classes: The training classes, in output-channel order.
        ignore_codes: Label codes treated as no-data (ignored by loss and metrics).
    """

    name: str = "custom"
    classes: list[ClassSpec] = Field(min_length=2)
    ignore_codes: list[int] = Field(default_factory=lambda: [0, 15])

    @model_validator(mode="after")
    def _codes_unique(self) -> ClassMapping:
        seen: dict[int, str] = {}
        for spec in self.classes:
            for code in spec.codes:
                if code in seen:
                    raise ValueError(f"label code {code} maps to both {seen[code]} and {spec.name}")
                seen[code] = spec.name
        for code in self.ignore_codes:
            if code in seen:
                raise ValueError(f"label code {code} is both ignored and mapped to {seen[code]}")
        return self

    @property
    def num_classes(self) -> int:
        """Number of training classes (model output channels)."""
        return len(self.classes)

    @property
    def names(self) -> list[str]:
        """Class names in output-channel order."""
        return [c.name for c in self.classes]

    @property
    def known_codes(self) -> set[int]:
        """Every label code the mapping accepts (mapped or ignored)."""
        return {code for c in self.classes for code in c.codes} | set(self.ignore_codes)

    def lookup_table(self) -> np.ndarray:
        """Builds a 256-entry table from label code to class index.

        Returns:
            A uint8 array where ``table[code]`` is the class index, :data:`IGNORE_INDEX` for
            ignored codes and for codes the mapping does not know.
        """
        table = np.full(256, IGNORE_INDEX, dtype=np.uint8)
        for index, spec in enumerate(self.classes):
            table[spec.codes] = index
        return table

    def unknown_codes(self, label: np.ndarray) -> list[int]:
        """Lists label codes present in ``label`` that the mapping does not know.

        Args:
            label: A label array of uint8 codes.

        Returns:
            The sorted unknown codes (empty when every code is known).
        """
        present = np.flatnonzero(np.bincount(label.ravel(), minlength=256))
        return sorted(int(c) for c in present if int(c) not in self.known_codes)

    def unknown_codes_message(self, unknown: list[int]) -> str:
        """The one message for label codes the mapping does not know (train, evaluate, check).

        Args:
            unknown: The unknown codes, as :meth:`unknown_codes` returns them.

        Returns:
            ``label codes [9] are not in the class mapping chesapeake7 (known codes: 0, 1,
            ...)``, without the file name (callers put it first).
        """
        known = ", ".join(str(c) for c in sorted(self.known_codes))
        return (
            f"label codes {list(unknown)} are not in the class mapping {self.name} "
            f"(known codes: {known})"
        )

    def encode(self, label: np.ndarray) -> np.ndarray:
        """Maps label codes to class indices (ignored and unknown codes to IGNORE_INDEX).

        Args:
            label: A uint8 array of label codes.

        Returns:
            A uint8 array of class indices of the same shape.
        """
        return self.lookup_table()[label]


def _spec(name: str, codes: list[int], color: str) -> ClassSpec:
    return ClassSpec(name=name, codes=codes, color=color)


PRESETS: dict[str, ClassMapping] = {
    "chesapeake7": ClassMapping(
        name="chesapeake7",
        classes=[
            _spec("water", [1], "#0000ff"),
            _spec("tree_canopy", [2], "#008000"),
            _spec("low_vegetation", [3], "#80ff80"),
            _spec("barren", [4], "#806060"),
            _spec("impervious", [5], "#ff0000"),
            _spec("road", [6], "#202020"),
        ],
        ignore_codes=[0, 15],
    ),
    "cvpr4": ClassMapping(
        name="cvpr4",
        classes=[
            _spec("water", [1], "#0000ff"),
            _spec("forest", [2], "#008000"),
            _spec("field", [3], "#80ff80"),
            _spec("impervious", [4, 5, 6], "#ff0000"),
        ],
        ignore_codes=[0, 15],
    ),
    # The original tutorial's scheme: its output 0 ("unknown") is never learned; here it is
    # the ignored no-data codes, and the four remaining outputs are the training classes.
    "tutorial5": ClassMapping(
        name="tutorial5",
        classes=[
            _spec("water", [1], "#0000ff"),
            _spec("trees", [2], "#008000"),
            _spec("herbaceous", [3], "#80ff80"),
            _spec("barren_impervious", [4, 5, 6], "#ff0000"),
        ],
        ignore_codes=[0, 15],
    ),
}


def resolve_mapping(value: str | ClassMapping | dict) -> ClassMapping:
    """Returns the class mapping named by a preset or given explicitly.

    Args:
        value: A preset name (``chesapeake7``, ``cvpr4``, ``tutorial5``), a mapping dict, or a
            :class:`ClassMapping`.

    Returns:
        The class mapping.

    Raises:
        ValueError: If the preset name is unknown.
    """
    if isinstance(value, ClassMapping):
        return value
    if isinstance(value, str):
        if value not in PRESETS:
            raise ValueError(f"unknown class preset {value!r}; choose one of {sorted(PRESETS)}")
        return PRESETS[value].model_copy(deep=True)
    return ClassMapping.model_validate(value)
