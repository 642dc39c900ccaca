"""Decoding of the DRA objects of `resource.k8s.io/v1` (ResourceClaim, ResourceSlice, DeviceClass)
and of a pod's `spec.resourceClaims`, for the live scheduler (the core's view is `model.dra`).

What is read: a claim's requests (`exactly`: deviceClassName, count, allocationMode, CEL
selectors, adminAccess, tolerations; `firstAvailable`: the same per subrequest, named
`request/subrequest`), its `matchAttribute` and `distinctAttribute` constraints, its
allocation results and `reservedFor`; a slice's driver, pool (name, generation), where its devices
are (`nodeName`, `nodeSelector`, `allNodes`, or per device), its shared counter sets, and each device's
attributes, capacities, taints and counter consumption; a class's CEL selectors. Attribute and
capacity names without a domain belong to the driver's domain (as Kubernetes' CEL environment sees
them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from shoal.kai.objects import JSON, meta
from shoal.kai.units import ConvertError
from shoal.model.dra import ResourceClaim, is_gpu_device_class
from shoal.model.resources import parse_memory

#: The finalizer kube-scheduler puts on a claim it allocates (the resource-claim controller removes
#: the allocation and the finalizer when no pod is reserved any more).
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
DeviceId = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    device_class: str
    count: int = 1
    #: allocationMode: All (every matching device of the reachable pools).
    all: bool = False
    selectors: tuple[str, ...] = ()
    admin_access: bool = False
    #: Device tolerations as (key, operator, value, effect).
    tolerations: tuple[tuple[str, str, str, str], ...] = ()
    #: `firstAvailable`: the alternatives in order of preference (named `request/subrequest`); the
    #: request's own class and counts are then unused.
    subrequests: tuple[DeviceRequest, ...] = ()

    def options(self) -> tuple[DeviceRequest, ...]:
        """What may satisfy the request, preferred first: its subrequests, or itself."""
        return self.subrequests or (self,)

    def least(self) -> int:
        """The fewest devices some option takes (All counts as one; admin access none)."""
        return min(0 if o.admin_access else 1 if o.all else o.count for o in self.options())


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    #: domain -> attribute name -> value (int, bool, str; versions as str).
    attributes: dict[str, dict[str, object]] = field(default_factory=dict)
    #: domain -> capacity name -> integer quantity.
    capacity: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Device taints as (key, value, effect).
    taints: tuple[tuple[str, str, str], ...] = ()
    #: Partitionable devices: what it takes of its pool's shared counter sets, as (set, ((counter,
    #: amount), ...)).
    consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Slice:
    name: str
    driver: str
    pool: str
    generation: int
    node: str | None
    node_selector: JSON | None
    all_nodes: bool
    devices: tuple[Device, ...]
    #: `sharedCounters`: counter set -> counter -> amount (a pool's sets, for its devices' `consumes`).
    counters: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Claim:
    namespace: str
    name: str
    uid: str
    resource_version: str
    requests: tuple[DeviceRequest, ...]
    labels: dict[str, str]
    from_template: bool
    #: Allocation results as (request, driver, pool, device, adminAccess); () if not allocated.
    results: tuple[tuple[str, str, str, str, bool], ...] = ()
    allocated: bool = False
    #: status.allocation.nodeSelector (where the allocated devices can be used), None = anywhere.
    node_selector: JSON | None = None
    #: status.reservedFor as (resource, name, uid).
    reserved_for: tuple[tuple[str, str, str], ...] = ()
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    #: A reason the scheduler cannot allocate it (e.g. firstAvailable), else "".
    unsupported: str = ""
    #: spec.devices.config (opaque driver parameters, each for some or all requests).
    config: tuple[JSON, ...] = ()
    #: Constraints as (requests, or () for all; the qualified attribute; True for `distinctAttribute`,
    #: False for `matchAttribute`).
    constraints: tuple[tuple[tuple[str, ...], str, bool], ...] = ()

    @property
    def reserved_uids(self) -> tuple[str, ...]:
        return tuple(uid for _, _, uid in self.reserved_for)

    def in_use(self) -> set[DeviceId]:
        """Devices the allocation holds exclusively (admin access holds none)."""
        return {(d, p, n) for _, d, p, n, admin in self.results if not admin}

    def to_model(self, eligible: tuple[str, ...] | None, network: bool = False,
                 nodes: tuple[str, ...] | None = None) -> ResourceClaim:
        """The core's view: `count` devices of the first request's class (All counts as one; of
        alternatives, the fewest), devices named `pool/device`; `network`: only network-attached
        devices can satisfy it; `nodes`: where its requests and constraints can be met at all."""
        count = sum(r.least() for r in self.requests)
        cls = self.requests[0].options()[0].device_class if self.requests else ""
        gpus = sum(r.least() for r in self.requests if is_gpu_device_class(r.options()[0].device_class))
        return ResourceClaim(name=self.name, namespace=self.namespace, device_class=cls, count=count,
                             gpu_count=gpus if len({r.options()[0].device_class for r in self.requests}) > 1 else None,
                             labels=self.labels, reserved_for=len(self.reserved_uids),
                             reserved_by=self.reserved_uids,
                             from_template=self.from_template,
                             allocated=tuple(f"{p}/{n}" for _, _, p, n, admin in self.results if not admin),
                             eligible=eligible, network=network, nodes=nodes)


def _exactly(name: str, ex: JSON) -> DeviceRequest:
    mode = ex.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise ConvertError(f"request {name}: unknown allocationMode {mode!r}")
    selectors = tuple(str((s.get("cel") or {}).get("expression", "")) for s in ex.get("selectors") or [])
    tolerations = tuple((str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                         str(t.get("effect") or "")) for t in ex.get("tolerations") or [])
    return DeviceRequest(name=name, device_class=str(ex.get("deviceClassName", "")),
                         count=int(ex.get("count") or 1), all=mode == "All", selectors=selectors,
                         admin_access=bool(ex.get("adminAccess")), tolerations=tolerations)


def _request_from(raw: JSON) -> DeviceRequest:
    name = str(raw.get("name", ""))
    if raw.get("firstAvailable"):
        subs = tuple(_exactly(f"{name}/{sub.get('name', '')}", sub) for sub in raw["firstAvailable"])
        return DeviceRequest(name=name, device_class="", subrequests=subs)
    return _exactly(name, raw.get("exactly") or {})


def _constraint_from(raw: JSON) -> tuple[tuple[str, ...], str, bool]:
    requests = tuple(str(r) for r in raw.get("requests") or ())
    if raw.get("matchAttribute"):
        return requests, str(raw["matchAttribute"]), False
    if raw.get("distinctAttribute"):
        return requests, str(raw["distinctAttribute"]), True
    raise ConvertError("a device constraint with neither matchAttribute nor distinctAttribute")


def claim_from(obj: JSON) -> Claim:
    m = meta(obj)
    spec = (obj.get("spec") or {}).get("devices") or {}
    status = obj.get("status") or {}
    unsupported = ""
    requests: list[DeviceRequest] = []
    constraints: list[tuple[tuple[str, ...], str, bool]] = []
    try:
        requests = [_request_from(r) for r in spec.get("requests") or []]
        constraints = [_constraint_from(c) for c in spec.get("constraints") or []]
    except (ConvertError, ValueError, TypeError) as e:
        unsupported = str(e)
    alloc = status.get("allocation") or None
    results = tuple((str(r.get("request", "")), str(r.get("driver", "")), str(r.get("pool", "")),
                     str(r.get("device", "")), bool(r.get("adminAccess")))
                    for r in ((alloc or {}).get("devices") or {}).get("results") or [])
    owners = m.get("ownerReferences") or []
    return Claim(namespace=str(m.get("namespace", "")), name=str(m.get("name")), uid=str(m.get("uid", "")),
                 resource_version=str(m.get("resourceVersion", "")), requests=tuple(requests),
                 labels=dict(m.get("labels") or {}),
                 from_template=any(o.get("kind") == "Pod" and o.get("controller") for o in owners),
                 results=results, allocated=alloc is not None, node_selector=(alloc or {}).get("nodeSelector"),
                 reserved_for=tuple((str(r.get("resource", "")), str(r.get("name", "")), str(r.get("uid", "")))
                                    for r in status.get("reservedFor") or []),
                 finalizers=tuple(m.get("finalizers") or ()), deleting=bool(m.get("deletionTimestamp")),
                 unsupported=unsupported, config=tuple(spec.get("config") or ()), constraints=tuple(constraints))


def _qualified(driver: str, raw: JSON) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for key, val in raw.items():
        domain, _, name = key.rpartition("/")
        out.setdefault(domain or driver, {})[name] = val
    return out


class Version(str):
    """A device attribute of kind `version` (a semantic version; CEL compares it as one)."""

    __slots__ = ()


def _attribute(val: JSON) -> object:
    if "version" in val:
        return Version(val["version"])
    for kind in ("int", "bool", "string"):
        if kind in val:
            return val[kind]
    return None


def device_from(driver: str, raw: JSON) -> Device:
    attrs = {k: _attribute(v or {}) for k, v in (raw.get("attributes") or {}).items()}
    caps = {k: parse_memory((v or {}).get("value", "0")) for k, v in (raw.get("capacity") or {}).items()}
    taints = tuple((str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
                   for t in raw.get("taints") or [])
    consumes = tuple((str(c.get("counterSet", "")), tuple(_amounts(c.get("counters") or {}).items()))
                     for c in raw.get("consumesCounters") or [])
    return Device(name=str(raw.get("name", "")), attributes=_qualified(driver, attrs),
                  capacity={d: {n: int(str(v)) for n, v in c.items()} for d, c in _qualified(driver, caps).items()},
                  taints=taints, consumes=consumes)


def tolerated(dev: Device, req: DeviceRequest) -> bool:
    """The request tolerates every taint of the device that keeps allocations off it (`NoSchedule`,
    `NoExecute`), as pod tolerations do node taints: an empty effect matches any, `Exists` any value
    (and an empty key with it any taint), `Equal` (the default) the taint's key and value."""
    def tolerates(t: tuple[str, str, str, str], key: str, value: str, effect: str) -> bool:
        tkey, op, tvalue, teffect = t
        if teffect and teffect != effect:
            return False
        if op == "Exists":
            return not tkey or tkey == key
        return tkey == key and tvalue == value
    return all(effect not in ("NoSchedule", "NoExecute") or any(tolerates(t, key, value, effect)
                                                                for t in req.tolerations)
               for key, value, effect in dev.taints)


def slice_from(obj: JSON) -> Slice:
    spec = obj.get("spec") or {}
    driver = str(spec.get("driver", ""))
    pool = spec.get("pool") or {}
    return Slice(name=str(meta(obj).get("name")), driver=driver, pool=str(pool.get("name", "")),
                 generation=int(pool.get("generation") or 0), node=spec.get("nodeName") or None,
                 node_selector=spec.get("nodeSelector") or None, all_nodes=bool(spec.get("allNodes")),
                 devices=tuple(device_from(driver, d) for d in spec.get("devices") or []),
                 counters={str(cs.get("name", "")): _amounts(cs.get("counters") or {})
                           for cs in spec.get("sharedCounters") or []})


def slices_from(obj: JSON) -> list[Slice]:
    """The slice, or with `perDeviceNodeSelection` one slice per device (named `slice/device`) with
    the device's own `nodeName`, `nodeSelector` or `allNodes`."""
    whole = slice_from(obj)
    spec = obj.get("spec") or {}
    if not spec.get("perDeviceNodeSelection"):
        return [whole]
    out = []
    for raw, dev in zip(spec.get("devices") or [], whole.devices):
        out.append(replace(whole, name=f"{whole.name}/{dev.name}", devices=(dev,), node=raw.get("nodeName") or None,
                           node_selector=raw.get("nodeSelector") or None, all_nodes=bool(raw.get("allNodes"))))
    return out


def _amounts(raw: JSON) -> dict[str, int]:
    return {str(k): parse_memory((v or {}).get("value", "0")) for k, v in raw.items()}


def device_class_selectors(obj: JSON) -> tuple[str, ...]:
    return tuple(str((s.get("cel") or {}).get("expression", ""))
                 for s in (obj.get("spec") or {}).get("selectors") or [])


def device_class_config(obj: JSON) -> tuple[JSON, ...]:
    return tuple((obj.get("spec") or {}).get("config") or ())


def allocation_config(claim: Claim, class_config: dict[str, tuple[JSON, ...]],
                      chosen: list[DeviceRequest]) -> list[JSON]:
    """`status.allocation.devices.config` as kube-scheduler writes it: the class configs of each
    request or subrequest allocated (`FromClass`, for it), then the claim's own (`FromClaim`, for the
    requests they name)."""
    out: list[JSON] = [{"source": "FromClass", "requests": [r.name], **cfg}
                       for r in chosen for cfg in class_config.get(r.device_class, ())]
    return out + [{"source": "FromClaim", **cfg} for cfg in claim.config]


def template_from(obj: JSON) -> Claim:
    """A ResourceClaimTemplate read as the claim it makes (its `spec.spec`), named after the template."""
    return claim_from({"metadata": meta(obj), "spec": (obj.get("spec") or {}).get("spec") or {}})


#: The name `pod_claim_names` gives a template claim the resource-claim controller has not made yet
#: (no real claim can be named so: `<` and spaces are not allowed in object names).
_AWAITED = re.compile(r"<(?P<entry>\S+) from template (?P<template>\S+), not created yet>")


def awaited_claim(entry: str, template: str) -> str:
    return f"<{entry} from template {template}, not created yet>"


def parse_awaited_claim(name: str) -> tuple[str, str] | None:
    """(pod claim entry, template) if `name` is `awaited_claim`'s, else None."""
    m = _AWAITED.fullmatch(name)
    return (m["entry"], m["template"]) if m else None


def pod_claim_names(obj: JSON) -> tuple[str, ...]:
    """The ResourceClaims a pod uses: `resourceClaimName`, or for a template the claim the
    resource-claim controller made (`status.resourceClaimStatuses`); one not made yet is named
    `awaited_claim(entry, template)` (the scheduler then waits for it, saying so)."""
    spec = obj.get("spec") or {}
    made = {s.get("name"): s.get("resourceClaimName")
            for s in (obj.get("status") or {}).get("resourceClaimStatuses") or []}
    names: list[str] = []
    for entry in spec.get("resourceClaims") or []:
        if entry.get("resourceClaimName"):
            names.append(str(entry["resourceClaimName"]))
        elif entry.get("resourceClaimTemplateName"):
            entry_name = entry.get("name")
            if entry_name in made:
                if made[entry_name]:  # none: the controller decided the pod needs no claim for it
                    names.append(str(made[entry_name]))
            else:
                names.append(awaited_claim(str(entry_name), str(entry["resourceClaimTemplateName"])))
    return tuple(names)
