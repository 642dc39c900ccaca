"""Shared counters of partitionable devices (`sharedCounters`, `consumesCounters`).

A pool publishes counter sets (in slices of their own); each device may consume amounts of some of
them. A device can be allocated only while every counter it consumes has that much left after the
devices allocated already (and those picked for the same claim): so a whole GPU and its partitions,
consuming one set, are never handed out together beyond the set's amounts. A device consuming a
set its pool does not publish cannot be allocated.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from shoal.kai.dra import Device, DeviceId, Slice

CounterSet = tuple[str, str, str]  # driver, pool, set name


@dataclass
class Counters:
    """What each counter set holds and what allocated devices consume of it."""

    capacity: dict[CounterSet, dict[str, int]] = field(default_factory=dict)
    consumed: dict[CounterSet, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, pools: list[Slice], in_use: set[DeviceId]) -> Counters:
        out = cls({(sl.driver, sl.pool, name): dict(c) for sl in pools for name, c in sl.counters.items()})
        for sl in pools:
            for dev in sl.devices:
                if dev.consumes and (sl.driver, sl.pool, dev.name) in in_use:
                    out.add(sl, dev)
        return out

    def fits(self, sl: Slice, dev: Device) -> bool:
        for name, amounts in dev.consumes:
            key = (sl.driver, sl.pool, name)
            cap, used = self.capacity.get(key), self.consumed.get(key, {})
            if cap is None or any(used.get(c, 0) + n > cap.get(c, 0) for c, n in amounts):
                return False
        return True

    def add(self, sl: Slice, dev: Device) -> None:
        for name, amounts in dev.consumes:
            used = self.consumed.setdefault((sl.driver, sl.pool, name), {})
            for c, n in amounts:
                used[c] = used.get(c, 0) + n

    def copy(self) -> Counters:
        return Counters(self.capacity, copy.deepcopy(self.consumed))

    def blocked(self, pools: list[Slice], in_use: set[DeviceId]) -> set[str]:
        """Devices ("pool/device") not allocated that cannot be now: their counters are taken."""
        return {f"{sl.pool}/{dev.name}" for sl in pools for dev in sl.devices
                if dev.consumes and (sl.driver, sl.pool, dev.name) not in in_use and not self.fits(sl, dev)}
