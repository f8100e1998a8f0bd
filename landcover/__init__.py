"""landcover: U-Net land-cover segmentation of NAIP imagery, data-parallel on many workers."""

import os

# albumentations asks PyPI for a newer version at import time; landcover never goes online.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

__version__ = "0.1.0"
