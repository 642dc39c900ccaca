"""The live DRA state: ResourceClaims, ResourceClaimTemplates, ResourceSlices and DeviceClasses from
their informers, the core's view of them in each snapshot (`fill`), and the choice of devices for a
claim on a node.

A pod whose claim kube-controller-manager has not made from its template yet waits, saying so (or
that the template does not exist); its GPUs are counted from the template meanwhile.

Only the newest generation of each (driver, pool) is used. Devices held by an allocation (every
claim's `status.allocation`, admin access excepted) are not free; a restarted scheduler lists the
claims before its first cycle, so it never hands out a device twice. The core sees node-local
slices (`nodeName`) and network-attached ones (`nodeSelector`, `allNodes`) with the nodes they
reach; `choose` takes the node's own devices before network-attached ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from shoal.kai.dra import (
    Claim,
    Device,
    DeviceRequest,
    Slice,
    claim_from,
    device_class_config,
    device_class_selectors,
    parse_awaited_claim,
    slices_from,
    template_from,
    tolerated,
)
from shoal.kai.objects import JSON
from shoal.kai.units import ConvertError
from shoal.kube.dra_cel import Selectors
from shoal.kube.dra_choose import pick_devices
from shoal.kube.dra_counters import Counters
from shoal.kube.watch_event import change_of
from shoal.model.dra import ResourceClaim, ResourceSlice, is_gpu_device_class, pod_dra_gpus
from shoal.model.node import Node
from shoal.model.resources import GPU
from shoal.model.snapshot import ClusterSnapshot

Picked = tuple[Slice, Device]


class AllocationError(Exception):
    """The claim cannot be allocated on that node (the message says why)."""


def node_selector_matches(selector: JSON, node: str, labels: dict[str, str]) -> bool:
    """A core/v1 NodeSelector: terms ORed, their expressions and fields ANDed."""
    def one(req: JSON, value: str | None) -> bool:
        op, values = req.get("operator"), req.get("values") or []
        if op == "In":
            return value in values
        if op == "NotIn":
            return value not in values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        return False
    for term in selector.get("nodeSelectorTerms") or []:
        exprs = [one(r, labels.get(str(r.get("key")))) for r in term.get("matchExpressions") or []]
        fields = [one(r, node if r.get("key") == "metadata.name" else None) for r in term.get("matchFields") or []]
        if (exprs or fields) and all(exprs) and all(fields):
            return True
    return False


@dataclasses.dataclass(slots=True)
class DraCache:
    on_change: Callable[[], None] = lambda: None
    claims: dict[tuple[str, str], Claim] = dataclasses.field(default_factory=dict)
    #: ResourceClaimTemplates read as the claims they make (for pods whose claim is not made yet).
    templates: dict[tuple[str, str], Claim] = dataclasses.field(default_factory=dict)
    slices: dict[str, Slice] = dataclasses.field(default_factory=dict)
    classes: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    class_config: dict[str, tuple[JSON, ...]] = dataclasses.field(default_factory=dict)
    problems: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    selectors: Selectors = dataclasses.field(default_factory=Selectors)
    devices_generation: int = 0
    _gpus: tuple[int, dict[str, int]] = (-1, {})
    #: Devices accepted by a claim's options (class, selectors, tolerations), for the devices of
    #: `_eligible_generation`: claims from one template share the answer.
    _eligible: dict[tuple[tuple[str, tuple[str, ...], tuple[tuple[str, str, str, str], ...]], ...],
                    tuple[str, ...]] = dataclasses.field(default_factory=dict)
    _eligible_generation: int = -1
    _feasible: dict[tuple[str, str], tuple[tuple[str, int, int], tuple[str, ...]]] = \
        dataclasses.field(default_factory=dict)
    #: (CEL expression, slice, device) -> (the device object judged, accepted): cel-python takes
    #: milliseconds per evaluation, so each expression is evaluated once per device until its slice
    #: is replaced (claims from one template share their expressions, classes share theirs).
    _cel: dict[tuple[str, str, str], tuple[Device, bool]] = dataclasses.field(default_factory=dict)

    # -- informer handlers -------------------------------------------------------------------
    def on_resource_claim(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        key, new = c.pair, c.obj
        if new is None:
            self.claims.pop(key, None)
            self._feasible.pop(key, None)
        else:
            claim = claim_from(new)
            prev = self.claims.get(key)
            if prev is not None and prev.resource_version.isdigit() and claim.resource_version.isdigit() \
                    and int(prev.resource_version) > int(claim.resource_version):
                return  # our own write (applied from its answer) is newer than this event
            self.claims[key] = claim
        self.on_change()

    def on_resource_claim_template(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        key, new = c.pair, c.obj
        if new is None:
            self.templates.pop(key, None)
        else:
            self.templates[key] = template_from(new)
        self.on_change()

    def on_resource_slice(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        # A slice with per-device node selection is kept as one slice per device ("name/device").
        for key in [k for k in self.slices if k == name or k.startswith(f"{name}/")]:
            del self.slices[key]
        if new is None:
            self._cel = {k: v for k, v in self._cel.items() if k[1] != name and not k[1].startswith(f"{name}/")}
        else:
            try:
                self.slices.update((sl.name, sl) for sl in slices_from(new))
                self.problems.pop(("ResourceSlice", name), None)
            except (ConvertError, ValueError, TypeError) as e:
                self.problems[("ResourceSlice", name)] = str(e)
        self.devices_generation += 1
        self.on_change()

    def on_device_class(self, kind: str, old: JSON | None, new: JSON | None) -> None:
        if (c := change_of(kind, old, new)) is None:
            return
        name, new = c.name, c.obj
        if new is None:
            self.classes.pop(name, None)
            self.class_config.pop(name, None)
        else:
            self.classes[name] = device_class_selectors(new)
            self.class_config[name] = device_class_config(new)
        self.devices_generation += 1
        self.on_change()

    # -- devices -----------------------------------------------------------------------------
    def pools(self) -> list[Slice]:
        """Slices of the newest generation of their (driver, pool)."""
        newest: dict[tuple[str, str], int] = {}
        for sl in self.slices.values():
            key = (sl.driver, sl.pool)
            newest[key] = max(newest.get(key, sl.generation), sl.generation)
        return [sl for sl in self.slices.values() if sl.generation == newest[(sl.driver, sl.pool)]]

    def in_use(self) -> set[tuple[str, str, str]]:
        return {d for c in self.claims.values() for d in c.in_use()}

    def matches(self, req: DeviceRequest, sl: Slice, dev: Device) -> bool:
        cls = self.classes.get(req.device_class)
        return cls is not None and tolerated(dev, req) and self.accepts(cls + req.selectors, sl, dev)

    def accepts(self, exprs: tuple[str, ...], sl: Slice, dev: Device) -> bool:
        """Every CEL expression accepts the device (each evaluated once per device object)."""
        for expr in exprs:
            key = (expr, sl.name, dev.name)
            memo = self._cel.get(key)
            if memo is None or memo[0] is not dev:
                memo = self._cel[key] = (dev, self.selectors.match((expr,), sl.driver, dev))
            if not memo[1]:
                return False
        return True

    def eligible(self, claim: Claim) -> tuple[str, ...]:
        """Devices ("pool/device") some (non-admin) request of the claim accepts."""
        if self._eligible_generation != self.devices_generation:
            self._eligible.clear()
            self._eligible_generation = self.devices_generation
        options = [o for r in claim.requests for o in r.options() if not o.admin_access]
        sig = tuple((o.device_class, o.selectors, o.tolerations) for o in options)
        out = self._eligible.get(sig)
        if out is None:
            out = self._eligible[sig] = tuple(sorted({f"{sl.pool}/{dev.name}" for sl in self.pools()
                                                      for dev in sl.devices for o in options
                                                      if self.matches(o, sl, dev)}))
        return out

    def feasible_nodes(self, claim: Claim, eligible: tuple[str, ...], nodes: list[Node]) -> tuple[str, ...]:
        """The nodes where the claim's alternatives and constraints can be met at all (free or not:
        the core counts what is free, and may free devices by eviction)."""
        key = (claim.namespace, claim.name)
        stamp = (claim.resource_version, self.devices_generation, hash(tuple(n.name for n in nodes)))
        memo = self._feasible.get(key)
        if memo is not None and memo[0] == stamp:
            return memo[1]
        accepted = set(eligible)
        hosts = {sl.node for sl in self.pools() if sl.node and any(f"{sl.pool}/{d.name}" in accepted
                                                                  for d in sl.devices)}
        anywhere = bool(accepted & self.network_devices())
        out = tuple(n.name for n in nodes if (n.name in hosts or anywhere) and not isinstance(
            pick_devices(claim, self.reachable(n.name, n.labels), set(), self.matches, n.name), str))
        self._feasible[key] = (stamp, out)
        return out

    def network_devices(self) -> set[str]:
        """Network-attached devices ("pool/device")."""
        return {f"{sl.pool}/{dev.name}" for sl in self.pools() if not sl.node for dev in sl.devices}

    def gpus_by_node(self) -> dict[str, int]:
        """Node-local devices a GPU device class (`model.dra.is_gpu_device_class`) accepts, by node."""
        if self._gpus[0] != self.devices_generation:
            gpu_classes = [(name, sel) for name, sel in self.classes.items() if is_gpu_device_class(name)]
            count: dict[str, int] = {}
            for sl in self.pools():
                if sl.node:
                    n = sum(1 for d in sl.devices if any(self.accepts(sel, sl, d) for _, sel in gpu_classes))
                    count[sl.node] = count.get(sl.node, 0) + n
            self._gpus = (self.devices_generation, count)
        return self._gpus[1]

    def reachable(self, node: str, labels: dict[str, str]) -> list[Slice]:
        """Slices whose devices `node` reaches, its own first (the order the core counts them in)."""
        out = [sl for sl in self.pools() if sl.node == node or sl.all_nodes or
               (sl.node_selector is not None and node_selector_matches(sl.node_selector, node, labels))]
        out.sort(key=lambda sl: sl.node is None)
        return out

    def choose(self, claim: Claim, node: str, labels: dict[str, str]
               ) -> tuple[list[JSON], JSON | None, list[DeviceRequest]]:
        """Allocation results, node selector and the (sub)requests allocated for the claim on `node`
        (`kube.dra_choose`: first available alternatives, matchAttribute); raises AllocationError."""
        if claim.unsupported:
            raise AllocationError(claim.unsupported)
        for req in claim.requests:
            for opt in req.options():
                if opt.device_class not in self.classes:
                    raise AllocationError(f"device class {opt.device_class!r} of request {opt.name} not found")
        used = self.in_use()
        picked = pick_devices(claim, self.reachable(node, labels), used, self.matches, node,
                              Counters.of(self.pools(), used))
        if isinstance(picked, str):
            raise AllocationError(picked)
        results = [{"request": r.name, "driver": s.driver, "pool": s.pool, "device": d.name}
                   | ({"adminAccess": True} if r.admin_access else {}) for r, s, d in picked]
        chosen = list({r.name: r for r, _, _ in picked}.values())
        return results, _allocation_selector(node, [s for _, s, _ in picked]), chosen

    # -- the core's view ---------------------------------------------------------------------
    def fill(self, snapshot: ClusterSnapshot) -> None:
        """Claims (with the devices they accept, whom they are reserved for and, for alternatives or
        constraints, the nodes where they can be met), slices (network-attached ones with the nodes
        they reach; partitions without room left out), each claim-using pod's DRA GPUs and each node's
        DRA GPUs (added to its `nvidia.com/gpu`, as the core counts DRA GPUs as whole GPUs) into the
        snapshot. A pod's template claim not made yet enters as a claim no pod can use (`unusable`)."""
        users = [p for p in snapshot.pods if p.resource_claims]
        if not self.claims and not self.slices and not users:
            return
        net = self.network_devices()
        claims: dict[tuple[str, str], ResourceClaim] = {}
        for key, c in self.claims.items():
            eligible = self.eligible(c)
            picky = not c.allocated and not c.unsupported and (
                c.constraints or any(r.subrequests for r in c.requests))
            claims[key] = c.to_model(eligible, network=bool(eligible) and net.issuperset(eligible),
                                     nodes=self.feasible_nodes(c, eligible, snapshot.nodes) if picky else None)
        for p in users:
            for name in p.resource_claims:
                awaited = parse_awaited_claim(name)
                if awaited is not None:
                    claims[(p.namespace, name)] = self._awaited(p.namespace, name, *awaited)
        snapshot.resource_claims = claims
        pools, used = self.pools(), self.in_use()
        # Partitions whose shared counters allocated devices use up do not exist for the core now.
        blocked = Counters.of(pools, used).blocked(pools, used) if any(sl.counters for sl in pools) else set()
        snapshot.resource_slices = [
            ResourceSlice(sl.name, sl.node or "", sl.driver,
                          tuple(d.name for d in sl.devices if f"{sl.pool}/{d.name}" not in blocked),
                          sl.pool, None if sl.node else self._reach(sl, snapshot)) for sl in pools]
        gpus = self.gpus_by_node()
        snapshot.nodes = [dataclasses.replace(n, allocatable={**n.allocatable,
                                                              GPU: n.allocatable.get(GPU, 0) + gpus[n.name]})
                          if gpus.get(n.name) else n for n in snapshot.nodes]
        snapshot.pods = [dataclasses.replace(p, dra_gpus=pod_dra_gpus(p.namespace, p.resource_claims, claims))
                         if p.resource_claims else p for p in snapshot.pods]

    @staticmethod
    def _reach(sl: Slice, snapshot: ClusterSnapshot) -> tuple[str, ...]:
        """The snapshot's nodes a network-attached slice's devices are reachable from."""
        return tuple(n.name for n in snapshot.nodes if sl.all_nodes or (
            sl.node_selector is not None and node_selector_matches(sl.node_selector, n.name, n.labels)))

    def _awaited(self, namespace: str, name: str, entry: str, template: str) -> ResourceClaim:
        """The claim a pod waits for the resource-claim controller to make from `template`: it asks what
        the template asks (so the pod's GPUs are known), and no pod can use it yet."""
        tpl = self.templates.get((namespace, template))
        if tpl is None:
            return ResourceClaim(name, namespace, "", count=0, from_template=True, unusable=(
                f"resource claim template {namespace}/{template} (pod claim {entry!r}) not found"))
        return dataclasses.replace(tpl.to_model(None), name=name, from_template=True, unusable=(
            f"waiting for the resource claim of pod claim {entry!r} to be made from template "
            f"{namespace}/{template} (by kube-controller-manager's resource-claim controller)"))


def _allocation_selector(node: str, slices: list[Slice]) -> JSON | None:
    """Where the allocation can be used: the node for node-local devices, else the slice's selector."""
    if any(sl.node for sl in slices):
        return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                        "values": [node]}]}]}
    for sl in slices:
        if sl.node_selector is not None:
            return sl.node_selector
    return None
