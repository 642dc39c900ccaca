"""How a cluster gives shared-GPU pods their device: the mode and the reservation pods' shape.

Modes:
* `labels` — the GPU group label and annotations only (the device is the runtime's business);
* `reservation` — KAI's mechanism: a reservation pod per GPU group reports the device, the pod's
  shared-GPU ConfigMaps carry `NVIDIA_VISIBLE_DEVICES` and `GPU_PORTION`;
* `fractioning` — the same handshake, and the GPU Fractioning Operator's per-container
  annotations (`nvidia.com/container.<c>.gpus.devices`, `.gpu-memory.request|limit`) for fractiond;
* `auto` — `reservation` when the reservation namespace exists, else `labels` (decided at start).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.kai.sharing import ReservationSpec

MODES = ("labels", "reservation", "fractioning", "auto")


@dataclass(slots=True)
class SharingOptions:
    mode: str = "labels"
    reservation: ReservationSpec = field(default_factory=ReservationSpec)
    #: How long a shared pod waits for its devices before its GPU group is released (seconds).
    timeout: float = 60.0
    #: Clean-up runs at least this often while leading (and on every relevant pod change).
    resync: float = 5.0

    @property
    def handshake(self) -> bool:
        """Reservation pods are used (modes `reservation` and `fractioning`)."""
        return self.mode in ("reservation", "fractioning")

    @property
    def fractioning(self) -> bool:
        return self.mode == "fractioning"
