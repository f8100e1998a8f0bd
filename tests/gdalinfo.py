"""``gdalinfo`` of the GDAL that rasterio bundles (GDAL's own ``GDALInfo``, through ctypes).

No GDAL command-line tool or ``osgeo`` package is installed with landcover; this runs the
library's ``gdalinfo`` on a file, as a GIS user's ``gdalinfo`` would report it (PAM sidecars,
category names, scales and colour tables included).
"""

from __future__ import annotations

import ctypes
import glob
import os
from functools import cache

import rasterio


@cache
def _library() -> ctypes.CDLL:
    folder = os.path.join(os.path.dirname(rasterio.__file__), os.pardir, "rasterio.libs")
    found = glob.glob(os.path.join(folder, "libgdal*.so*"))
    lib = ctypes.CDLL(found[0]) if found else ctypes.CDLL("libgdal.so")
    lib.GDALAllRegister()
    lib.GDALOpen.restype = ctypes.c_void_p
    lib.GDALOpen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.GDALInfoOptionsNew.restype = ctypes.c_void_p
    lib.GDALInfoOptionsNew.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.GDALInfoOptionsFree.argtypes = [ctypes.c_void_p]
    lib.GDALInfo.restype = ctypes.c_void_p
    lib.GDALInfo.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.GDALClose.argtypes = [ctypes.c_void_p]
    lib.VSIFree.argtypes = [ctypes.c_void_p]
    return lib


def gdalinfo(path: str | os.PathLike) -> str:
    """What ``gdalinfo PATH`` prints.

    Args:
        path: A raster file.

    Returns:
        The report.
    """
    lib = _library()
    dataset = lib.GDALOpen(os.fsencode(path), 0)
    assert dataset, f"GDAL cannot open {path}"
    options = lib.GDALInfoOptionsNew(None, None)
    try:
        text = lib.GDALInfo(dataset, options)
        try:
            return ctypes.string_at(text).decode()
        finally:
            lib.VSIFree(text)
    finally:
        lib.GDALInfoOptionsFree(options)
        lib.GDALClose(dataset)
