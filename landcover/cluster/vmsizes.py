"""Azure GPU VM sizes: GPUs per node, GPU model and memory, InfiniBand, retirement.

The table holds the sizes a data-parallel land-cover run would use, from the retired K80
(NC) and P100 (NCv2) generations, through V100 (NCv3, retired in 2025), to A100 and H100.
``interconnect_gbps`` is the node's InfiniBand bandwidth where it is published per VM
(8 GPUs x 200 Gb/s HDR on ND A100 v4, 8 x 400 Gb/s NDR on ND H100 v5); it is ``None``
where no figure is given here. Lookups ignore case.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class VmSize:
    """One Azure VM size.

    Attributes:
        name: The size as Azure spells it, e.g. ``Standard_ND96isr_H100_v5``.
        family: The VM series, e.g. ``ND H100 v5``.
        gpus: GPUs per node (a training process per GPU).
        gpu_model: The GPU model.
        gpu_memory_gb: Memory of one GPU, GB.
        infiniband: Whether nodes are linked by InfiniBand (RDMA) for cross-node all-reduce.
        retired: Whether Azure has retired the size (it can no longer be deployed).
        note: A short note (retirement date, successor, interconnect).
        interconnect_gbps: InfiniBand bandwidth per node in Gb/s, where known.
    """

    name: str
    family: str
    gpus: int
    gpu_model: str
    gpu_memory_gb: int
    infiniband: bool
    retired: bool = False
    note: str = ""
    interconnect_gbps: float | None = None

    def describe(self) -> str:
        """One line: GPUs, model, memory and interconnect."""
        link = "InfiniBand" if self.infiniband else "no InfiniBand"
        if self.interconnect_gbps:
            link += f" {self.interconnect_gbps:,.0f} Gb/s per node"
        return f"{self.family}: {self.gpus} x {self.gpu_model} {self.gpu_memory_gb} GB, {link}"


def _family(
    family: str,
    sizes: dict[str, int],
    gpu_model: str,
    gpu_memory_gb: int,
    retired: bool = False,
    note: str = "",
    infiniband: tuple[str, ...] = (),
    interconnect_gbps: float | None = None,
) -> list[VmSize]:
    return [
        VmSize(
            name,
            family,
            gpus,
            gpu_model,
            gpu_memory_gb,
            infiniband=name in infiniband,
            retired=retired,
            note=note,
            interconnect_gbps=interconnect_gbps if name in infiniband else None,
        )
        for name, gpus in sizes.items()
    ]


_RETIRED_NC = "retired in 2023; use NC A100 v4 or NC H100 v5"
_RETIRED_NCV3 = "retired 30 Sep 2025; use NC A100 v4 or NC H100 v5"

_TABLE: list[VmSize] = [
    *_family(
        "NC",
        {"Standard_NC6": 1, "Standard_NC12": 2, "Standard_NC24": 4, "Standard_NC24r": 4},
        "NVIDIA Tesla K80 (one GK210)",
        12,
        retired=True,
        note=_RETIRED_NC,
        infiniband=("Standard_NC24r",),
    ),
    *_family(
        "NCv2",
        {
            "Standard_NC6s_v2": 1,
            "Standard_NC12s_v2": 2,
            "Standard_NC24s_v2": 4,
            "Standard_NC24rs_v2": 4,
        },
        "NVIDIA Tesla P100",
        16,
        retired=True,
        note=_RETIRED_NC,
        infiniband=("Standard_NC24rs_v2",),
    ),
    *_family(
        "NCv3",
        {
            "Standard_NC6s_v3": 1,
            "Standard_NC12s_v3": 2,
            "Standard_NC24s_v3": 4,
            "Standard_NC24rs_v3": 4,
        },
        "NVIDIA Tesla V100",
        16,
        retired=True,
        note=_RETIRED_NCV3,
        infiniband=("Standard_NC24rs_v3",),
    ),
    *_family(
        "NCasT4_v3",
        {
            "Standard_NC4as_T4_v3": 1,
            "Standard_NC8as_T4_v3": 1,
            "Standard_NC16as_T4_v3": 1,
            "Standard_NC64as_T4_v3": 4,
        },
        "NVIDIA T4",
        16,
        note="inference-class GPU; slow for U-Net training",
    ),
    *_family(
        "NC A100 v4",
        {
            "Standard_NC24ads_A100_v4": 1,
            "Standard_NC48ads_A100_v4": 2,
            "Standard_NC96ads_A100_v4": 4,
        },
        "NVIDIA A100 PCIe",
        80,
        note="no InfiniBand: nodes all-reduce over Ethernet",
    ),
    *_family(
        "ND A100 v4",
        {"Standard_ND96asr_v4": 8},
        "NVIDIA A100 SXM",
        40,
        note="NVLink inside the node; 200 Gb/s HDR InfiniBand per GPU",
        infiniband=("Standard_ND96asr_v4",),
        interconnect_gbps=1600,
    ),
    *_family(
        "NDm A100 v4",
        {"Standard_ND96amsr_A100_v4": 8},
        "NVIDIA A100 SXM",
        80,
        note="NVLink inside the node; 200 Gb/s HDR InfiniBand per GPU",
        infiniband=("Standard_ND96amsr_A100_v4",),
        interconnect_gbps=1600,
    ),
    *_family(
        "ND H100 v5",
        {"Standard_ND96isr_H100_v5": 8},
        "NVIDIA H100 SXM",
        80,
        note="NVLink inside the node; 400 Gb/s NDR InfiniBand per GPU",
        infiniband=("Standard_ND96isr_H100_v5",),
        interconnect_gbps=3200,
    ),
    *_family(
        "ND H200 v5",
        {"Standard_ND96isr_H200_v5": 8},
        "NVIDIA H200 SXM",
        141,
        note="NVLink inside the node; 400 Gb/s NDR InfiniBand per GPU",
        infiniband=("Standard_ND96isr_H200_v5",),
        interconnect_gbps=3200,
    ),
    *_family(
        "NC H100 v5",
        {"Standard_NC40ads_H100_v5": 1, "Standard_NC80adis_H100_v5": 2},
        "NVIDIA H100 NVL",
        94,
        note="no InfiniBand: nodes all-reduce over Ethernet",
    ),
]

VM_SIZES: dict[str, VmSize] = {vm.name.lower(): vm for vm in _TABLE}
"""Every known size, keyed by its lower-case name."""


def find_vm_size(name: str) -> VmSize | None:
    """Looks up a VM size, ignoring case.

    Args:
        name: A size name such as ``standard_nc24s_v3``.

    Returns:
        The size, or ``None`` when it is not in the table.
    """
    return VM_SIZES.get(name.strip().lower())


def close_matches(name: str, n: int = 3) -> list[str]:
    """Known sizes whose names are close to ``name`` (for "did you mean" messages).

    Args:
        name: An unknown size name.
        n: At most this many matches.

    Returns:
        The matching sizes' names as Azure spells them, best first.
    """
    keys = difflib.get_close_matches(name.strip().lower(), list(VM_SIZES), n=n, cutoff=0.6)
    return [VM_SIZES[k].name for k in keys]


def current_sizes() -> list[VmSize]:
    """The sizes that are not retired, in table order."""
    return [vm for vm in _TABLE if not vm.retired]
