"""When a tile's imagery was acquired: the STAC items' ``datetime``.

Found, in this order, from

0. the STAC item the tile was found in, for a job's tiles from a catalogue search
   (``landcover predict --stac``: :attr:`~landcover.mapping.spec.JobOptions.acquired`, carried
   to the worker by the tile's :class:`~landcover.mapping.tiles.TileEntry`);
1. a NAIP file name, which ends in the acquisition date: ``m_4709963_se_14_1_20100629``
   (quarter quad, quadrant, UTM zone, resolution in metres, date) and the newer
   ``m_3807504_ne_18_060_20180815`` (resolution in centimetres), sometimes followed by a
   processing date (``..._20180815_20190206``: the first is the acquisition);
2. the file's acquisition tags (``ACQUISITIONDATETIME`` in GDAL's ``IMAGERY`` domain, as GDAL
   reads satellite sidecars; ``ACQUISITIONDATE``, ``ACQUISITION_DATE``, ``DATE_ACQUIRED``;
   EXIF's ``DateTimeOriginal``);
3. the TIFF's ``DateTime`` tag (``TIFFTAG_DATETIME``, "date and time of image creation").

Each carries a few header bytes (the name none), so reading them
(:func:`landcover.mapping.outputs.acquisition`) costs a header read per tile whose name is not
NAIP's. When none is found the date is unknown: the item's ``datetime`` is null
with a ``start_datetime`` / ``end_datetime`` range, as the STAC specification allows (see
:mod:`landcover.mapping.stac`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from landcover import storage

NAIP_NAME = re.compile(
    r"(?<![0-9a-z])m_\d{7}_(?:ne|nw|se|sw)_\d{1,2}_\d{1,3}_(\d{8})(?![0-9])", re.IGNORECASE
)
"""A NAIP DOQQ name; group 1: its acquisition date ``YYYYMMDD``."""

DATE_TAGS = (
    ("IMAGERY", "ACQUISITIONDATETIME"),
    ("", "ACQUISITIONDATETIME"),
    ("", "ACQUISITIONDATE"),
    ("", "ACQUISITION_DATE"),
    ("", "DATE_ACQUIRED"),
    ("", "EXIF_DateTimeOriginal"),
    ("", "TIFFTAG_DATETIME"),
)
"""``(GDAL metadata domain, item)`` that may hold the acquisition time, most specific first."""

_EARLIEST_YEAR = 1900


@dataclass(frozen=True)
class Acquired:
    """When a tile's imagery was acquired, and how that is known.

    Attributes:
        time: ISO 8601 in UTC (``2010-06-29T00:00:00Z``; a date alone is its midnight).
        source: ``file name`` or the tag it came from (``TIFFTAG_DATETIME tag``).
    """

    time: str
    source: str

    @property
    def datetime(self) -> datetime:
        """The time as an aware datetime."""
        return datetime.fromisoformat(self.time)


def parse_time(text: str) -> datetime | None:
    """A date or time as TIFF, EXIF, ISO 8601 or ``YYYYMMDD`` write it, in UTC.

    Args:
        text: ``2015:07:04 10:30:00``, ``2015-07-04``, ``2015-07-04T10:30:00Z``,
            ``20150704``... (a time without a zone is taken as UTC).

    Returns:
        The time, or ``None`` when it is not a plausible date (before 1900 or in the future).
    """
    text = text.strip().rstrip("\x00").strip()
    if re.fullmatch(r"\d{8}", text):
        text = f"{text[:4]}-{text[4:6]}-{text[6:]}"
    elif re.match(r"\d{4}:\d{2}:\d{2}", text):  # TIFF and EXIF: YYYY:MM:DD HH:MM:SS
        text = f"{text[:4]}-{text[5:7]}-{text[8:]}"
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    when = when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when
    when = when.astimezone(timezone.utc)
    if when.year < _EARLIEST_YEAR or when > datetime.now(timezone.utc):
        return None
    return when


def _iso(when: datetime) -> str:
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def from_item(when: datetime) -> Acquired:
    """The acquisition time a STAC item gives.

    Args:
        when: The item's ``datetime`` (or the end of its range); without a zone, UTC.

    Returns:
        The time, whose source is ``STAC item``.
    """
    when = when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when
    return Acquired(_iso(when.astimezone(timezone.utc)), "STAC item")


def from_name(tile: str) -> Acquired | None:
    """The acquisition date in a NAIP file name, if the name is NAIP's.

    Args:
        tile: A path or URL.

    Returns:
        The date, or ``None``.
    """
    match = NAIP_NAME.search(storage.name(tile))
    when = parse_time(match.group(1)) if match else None
    return Acquired(_iso(when), "file name") if when else None


def from_tags(tags: dict[str, dict[str, str]]) -> Acquired | None:
    """The acquisition time in a raster's metadata.

    Args:
        tags: Metadata items by GDAL domain (``""``: the default domain).

    Returns:
        The time of the first tag of :data:`DATE_TAGS` that holds one, or ``None``.
    """
    for domain, key in DATE_TAGS:
        value = tags.get(domain, {}).get(key)
        when = parse_time(value) if value else None
        if when is not None:
            return Acquired(_iso(when), f"{key} tag")
    return None
