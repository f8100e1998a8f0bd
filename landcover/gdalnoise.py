"""Keeping GDAL's and libtiff's raw messages off the console while maps are written.

A write that fails (a full disk, say) makes libtiff print lines such as
``_tiffWriteProc: No space left on device.`` straight to the process's stderr, and rasterio
log GDAL's warnings (``CPLE_AppDefined in A strile cannot be rewritten ...``), which Python's
last-resort handler prints. The error itself still reaches us as an exception, which
:mod:`landcover.diskerrors` turns into one line, so these copies are noise:

- libtiff's process-wide error printer is switched off (:func:`silence_libtiff`); GDAL gets
  libtiff's errors through its own per-file handlers and raises them as before;
- GDAL's process-wide error handler, which prints ``ERROR 1: ...`` lines, is replaced by its
  quiet one (:func:`silence_gdal`). rasterio pushes a handler of its own (its log records)
  only in a thread inside one of its ``Env`` contexts; predict's writer and reader threads
  write and read open datasets outside one, and a full disk there printed
  ``ERROR 1: TIFFAppendToStrip:Write error ...`` beside our one line. GDAL keeps the last
  error per thread whatever the handler, so rasterio still raises it in the calling thread;
- inside :func:`quiet_gdal`, rasterio's log records are held back, and replayed only if the
  block succeeds.
"""

from __future__ import annotations

import ctypes
import glob
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_libtiff_silenced = False
_gdal_silenced = False
_held: dict[int, list[logging.LogRecord]] = {}
"""Records held back per thread inside :func:`quiet_gdal`."""


def silence_libtiff() -> bool:
    """Switches off libtiff's own stderr error printer in this process (idempotent).

    Returns:
        True if libtiff was found (rasterio's bundled copy or the system's) and silenced.
    """
    global _libtiff_silenced
    with _lock:
        if _libtiff_silenced:
            return True
        libtiff = _rasterio_library("libtiff", ["libtiff.so.6"])
        if libtiff is not None:
            libtiff.TIFFSetErrorHandler.restype = ctypes.c_void_p
            libtiff.TIFFSetErrorHandler.argtypes = [ctypes.c_void_p]
            libtiff.TIFFSetErrorHandler(None)
            _libtiff_silenced = True
        return _libtiff_silenced


def _rasterio_library(prefix: str, fallbacks: list[str]) -> ctypes.CDLL | None:
    """The shared library rasterio uses whose file name starts with ``prefix``.

    rasterio's bundled copy (``rasterio.libs``, as in its PyPI wheels) comes first: other
    wheels (fiona's GDAL, Pillow's libtiff) may load copies of their own into the process.

    Args:
        prefix: The start of the library's file name, e.g. ``libgdal``.
        fallbacks: Names or paths to try next (a system build of rasterio).

    Returns:
        The library, or ``None`` when none loads.
    """
    import rasterio  # loads GDAL

    libs = os.path.join(os.path.dirname(os.path.dirname(rasterio.__file__)), "rasterio.libs")
    for candidate in [*sorted(glob.glob(os.path.join(libs, f"{prefix}*.so*"))), *fallbacks]:
        try:
            return ctypes.CDLL(candidate)
        except OSError:
            continue
    return None


def _mapped_libraries(prefix: str) -> list[str]:
    """Paths of this process's mapped files whose name starts with ``prefix`` (Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if len(line.split()) >= 6}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith(prefix))


def silence_gdal() -> bool:
    """Makes GDAL's process-wide error handler its quiet one (idempotent).

    Threads outside rasterio's ``Env`` contexts then print nothing; a handler that is not
    GDAL's default printer (one the embedding program set) is left in place.

    Returns:
        True if GDAL's handler is the quiet one now.
    """
    global _gdal_silenced
    with _lock:
        if _gdal_silenced:
            return True
        gdal = _rasterio_library("libgdal", _mapped_libraries("libgdal"))
        if gdal is None:
            return False
        gdal.CPLSetErrorHandler.restype = ctypes.c_void_p
        gdal.CPLSetErrorHandler.argtypes = [ctypes.c_void_p]
        quiet = ctypes.cast(gdal.CPLQuietErrorHandler, ctypes.c_void_p).value
        printer = ctypes.cast(gdal.CPLDefaultErrorHandler, ctypes.c_void_p).value
        previous = gdal.CPLSetErrorHandler(quiet)
        if previous not in (None, printer, quiet):
            gdal.CPLSetErrorHandler(previous)  # not ours to replace
            return False
        _gdal_silenced = True
        return True


class _Holder(logging.Handler):
    """Holds rasterio's records of threads inside :func:`quiet_gdal`; passes on the others."""

    def emit(self, record: logging.LogRecord) -> None:
        held = _held.get(threading.get_ident())
        if held is not None:
            held.append(record)
        else:
            logging.getLogger().handle(record)  # as if propagated: root's handlers


_holder = _Holder()


def _install_holder() -> None:
    """Routes rasterio's log records through :class:`_Holder` (once per process)."""
    logger = logging.getLogger("rasterio")
    if _holder not in logger.handlers:
        logger.addHandler(_holder)
        logger.propagate = False


@contextmanager
def quiet_gdal() -> Iterator[None]:
    """Keeps GDAL's raw messages of the writes inside off the console.

    rasterio's log records of this thread are held back and replayed when the block ends
    without an error (its errors are reported by whoever catches them); libtiff's own printer
    and GDAL's process-wide one are switched off for good.

    Yields:
        Nothing; wrap the writes.
    """
    silence_libtiff()
    silence_gdal()
    ident = threading.get_ident()
    with _lock:
        _install_holder()
        nested = ident in _held
        if not nested:
            _held[ident] = []
    if nested:
        yield
        return
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        with _lock:
            records = _held.pop(ident, [])
        if not failed:
            for record in records:
                logging.getLogger().handle(record)
