"""Choosing the devices of one ResourceClaim among the slices a node reaches, as kube-scheduler's
structured-parameters allocator does: requests in order, each satisfied by its first alternative
(`firstAvailable` subrequest) that can be, honouring the claim's constraints.

A constraint covers every device allocated for the requests it names (all requests if none; a
request's name covers its subrequests); a device without its attribute cannot serve them.
`matchAttribute` binds them to one value of the attribute, `distinctAttribute` gives each its own
value. The search backtracks over alternatives and over the values a `matchAttribute` can take (in
the order devices come: the node's own first); within one value the first free devices are taken
whose `distinctAttribute` values are new and whose shared counters (partitionable devices,
`kube.dra_counters`) still have room. Claims are small (a few requests), so the search is too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from shoal.kai.dra import Claim, Device, DeviceId, DeviceRequest, Slice
from shoal.kube.dra_counters import Counters

Pick = tuple[DeviceRequest, Slice, Device]
Matches = Callable[[DeviceRequest, Slice, Device], bool]


def attribute(sl: Slice, dev: Device, name: str) -> object | None:
    """A device's attribute by qualified name (`domain/name`; no domain: the driver's)."""
    domain, _, attr = name.rpartition("/")
    return dev.attributes.get(domain or sl.driver, {}).get(attr)


def _applies(requests: tuple[str, ...], option: DeviceRequest) -> bool:
    return not requests or option.name.split("/")[0] in requests or option.name in requests


@dataclass
class _Search:
    claim: Claim
    reachable: list[Slice]
    used: set[DeviceId]
    matches: Matches
    node: str
    counters: Counters
    #: Why options failed (the first reason per request is reported).
    reasons: list[str] = field(default_factory=list)

    def run(self, i: int, picked: list[Pick], fixed: dict[int, object]) -> list[Pick] | None:
        if i == len(self.claim.requests):
            return picked
        req = self.claim.requests[i]
        mine = {(s.driver, s.pool, d.name) for _, s, d in picked}
        for opt in req.options():
            matching = [(sl, dev) for sl in self.reachable for dev in sl.devices if self.matches(opt, sl, dev)]
            free = [(sl, dev) for sl, dev in matching if (sl.driver, sl.pool, dev.name) not in mine and
                    (opt.admin_access or (sl.driver, sl.pool, dev.name) not in self.used)]
            want = len(matching) if opt.all else opt.count
            if not matching or len(free) < want:
                self.reasons.append(f"request {opt.name} of claim {self.claim.namespace}/{self.claim.name}: "
                                    f"{len(free)} free matching devices for {self.node}, {want} wanted")
                continue
            cons = [k for k, (names, _, distinct) in enumerate(self.claim.constraints)
                    if not distinct and _applies(names, opt)]
            for group, values in self._groups(free, cons, fixed):
                if len(group) < want or (opt.all and len(group) < len(matching)):
                    continue
                taken = self._take(opt, group, want, picked)
                if taken is None:
                    self.reasons.append(self._short(opt, want))
                    continue
                got = self.run(i + 1, picked + [(opt, sl, dev) for sl, dev in taken], {**fixed, **values})
                if got is not None:
                    return got
            if cons:
                attrs = ", ".join(sorted({self.claim.constraints[k][1] for k in cons}))
                self.reasons.append(f"request {opt.name} of claim {self.claim.namespace}/{self.claim.name}: no "
                                    f"{want} free matching devices for {self.node} share {attrs} (matchAttribute)")
        return None

    def _short(self, opt: DeviceRequest, want: int) -> str:
        """Why `_take` found too few devices."""
        distinct = sorted({attr for names, attr, d in self.claim.constraints if d and _applies(names, opt)})
        why = (f"no {want} free matching devices for {self.node} have distinct {', '.join(distinct)} "
               f"(distinctAttribute) and room in their shared counters" if distinct else
               f"the shared counters of the free matching devices on {self.node} are used up")
        return f"request {opt.name} of claim {self.claim.namespace}/{self.claim.name}: {why}"

    def _take(self, opt: DeviceRequest, group: list[tuple[Slice, Device]], want: int, picked: list[Pick]
              ) -> list[tuple[Slice, Device]] | None:
        """The first `want` devices of the group with values of their distinctAttribute constraints
        not taken yet and room in their counters, after those allocated and picked already; None if
        fewer."""
        distinct = [attr for names, attr, d in self.claim.constraints if d and _applies(names, opt)]
        if not distinct and not any(dev.consumes for _, dev in group):
            return group[:want]
        seen = {attr: {attribute(sl, dev, attr) for o, sl, dev in picked
                       if any(d and a == attr and _applies(n, o) for n, a, d in self.claim.constraints)}
                for attr in distinct}
        state = self.counters.copy()
        for _, sl, dev in picked:
            state.add(sl, dev)
        out: list[tuple[Slice, Device]] = []
        for sl, dev in group:
            if len(out) == want:
                break
            values = [(attr, attribute(sl, dev, attr)) for attr in distinct]
            if any(v is None or v in seen[attr] for attr, v in values) or not state.fits(sl, dev):
                continue
            state.add(sl, dev)
            for attr, v in values:
                seen[attr].add(v)
            out.append((sl, dev))
        return out if len(out) == want else None

    def _groups(self, free: list[tuple[Slice, Device]], cons: list[int], fixed: dict[int, object]
                ) -> Iterator[tuple[list[tuple[Slice, Device]], dict[int, object]]]:
        """The free devices grouped by their values of the constrained attributes, in order."""
        if not cons:
            yield free, {}
            return
        groups: dict[tuple[object, ...], list[tuple[Slice, Device]]] = {}
        for sl, dev in free:
            key = tuple(attribute(sl, dev, self.claim.constraints[k][1]) for k in cons)
            if any(v is None for v in key) or any(k in fixed and fixed[k] != v for k, v in zip(cons, key)):
                continue
            groups.setdefault(key, []).append((sl, dev))
        for key, group in groups.items():
            yield group, dict(zip(cons, key))


def pick_devices(claim: Claim, reachable: list[Slice], used: set[DeviceId], matches: Matches,
                 node: str, counters: Counters | None = None) -> list[Pick] | str:
    """The devices for the claim's requests (an option and its devices per request), or why none.
    `counters`: the shared counters with what allocated devices consume (none: all room)."""
    search = _Search(claim, reachable, used, matches, node, counters or Counters.of(reachable, set()))
    found = search.run(0, [], {})
    if found is not None:
        return found
    return "; ".join(dict.fromkeys(search.reasons)) or f"claim {claim.namespace}/{claim.name} has no requests"
