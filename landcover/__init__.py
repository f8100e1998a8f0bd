"""landcover: U-Net land-cover segmentation of NAIP imagery, data-parallel on many workers."""

__version__ = "0.1.0"
