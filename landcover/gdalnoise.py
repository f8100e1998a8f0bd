"""Keeping GDAL's and libtiff's raw messages off the console while maps are written.

A write that fails (a full disk, say) makes libtiff print lines such as
``_tiffWriteProc: No space left on device.`` straight to the process's stderr, and rasterio
log GDAL's warnings (``CPLE_AppDefined in A strile cannot be rewritten ...``), which Python's
last-resort handler prints. The error itself still reaches us as an exception, which
:mod:`landcover.diskerrors` turns into one line, so these copies are noise:

- libtiff's process-wide error printer is switched off (:func:`silence_libtiff`); GDAL gets
  libtiff's errors through its own per-file handlers and raises them as before;
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
        import rasterio

        libs = os.path.join(os.path.dirname(os.path.dirname(rasterio.__file__)), "rasterio.libs")
        for candidate in [*sorted(glob.glob(os.path.join(libs, "libtiff*.so*"))), "libtiff.so.6"]:
            try:
                libtiff = ctypes.CDLL(candidate)
            except OSError:
                continue
            libtiff.TIFFSetErrorHandler.restype = ctypes.c_void_p
            libtiff.TIFFSetErrorHandler.argtypes = [ctypes.c_void_p]
            libtiff.TIFFSetErrorHandler(None)
            _libtiff_silenced = True
            break
        return _libtiff_silenced


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
    is switched off for good.

    Yields:
        Nothing; wrap the writes.
    """
    silence_libtiff()
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
