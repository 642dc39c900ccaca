"""DRA (dynamic resource allocation) objects as far as the scheduler counts them (kai-spec §3.15).

A `ResourceClaim` asks `count` devices of a device class; a class whose name contains "gpu" makes
them GPUs, which count as whole GPUs of the pod for quota, fit and topology (`Pod.dra_gpus`). A
claim made from a pod's template belongs to that pod; any other claim is shared and must carry the
job's queue label. `reserved_for` is the number of pods the claim is reserved for already.
A `ResourceSlice` publishes the devices one driver offers on one node, or (network-attached,
`reach`) to a set of nodes: a claim is satisfied by free devices its pod's node reaches (counted,
not chosen: which devices is the binder's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Pods one claim may be reserved for (Kubernetes' ResourceClaimReservedForMaxSize).
MAX_CLAIM_CONSUMERS = 256
QUEUE_LABEL = "kai.scheduler/queue"


def is_gpu_device_class(name: str) -> bool:
    return "gpu" in name.lower()


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    name: str
    namespace: str
    device_class: str
    count: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    reserved_for: int = 0
    #: Created from the pod's resource-claim template (not shared with other pods).
    from_template: bool = False
    #: Devices already allocated to the claim ("pool/device" names), empty if not allocated.
    allocated: tuple[str, ...] = ()
    #: The devices ("pool/device") its class and request selectors accept; None = any device.
    eligible: tuple[str, ...] | None = None
    #: Why no pod can use the claim yet ("" = it can): e.g. the adapter still waits for the claim
    #: to be made from the pod's ResourceClaimTemplate (the counts above are then the template's).
    unusable: str = ""
    #: Only network-attached devices can satisfy it: they are not GPUs of the pod's node, so the
    #: claim counts no GPUs (for fit, nor for quota).
    network: bool = False
    #: The nodes where its requests (alternatives, constraints) can be met at all, free or not (the
    #: adapter's check, for claims with `firstAvailable` or constraints); None = not checked.
    nodes: tuple[str, ...] | None = None
    #: Of `count`, the devices of GPU classes when its requests are of several classes (a GPU and a
    #: NIC, say); None = all of them if `device_class` is a GPU class.
    gpu_count: int | None = None
    #: The uids of the pods it is reserved for, when the adapter knows them (else only their number,
    #: `reserved_for`): a reservation for a pod that is not ours keeps the claim where it is allocated.
    reserved_by: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        """GPUs this claim asks for (0 for a non-GPU device class or network-attached devices)."""
        if self.network:
            return 0
        if self.gpu_count is not None:
            return self.gpu_count
        return self.count if is_gpu_device_class(self.device_class) else 0


def pod_dra_gpus(namespace: str, claim_names: tuple[str, ...] | list[str],
                 claims: dict[tuple[str, str], ResourceClaim]) -> int:
    """GPUs the pod's claims ask for (unknown claims count 0; the scheduler reports them)."""
    total = 0
    for name in claim_names:
        claim = claims.get((namespace, name))
        if claim is not None:
            total += claim.gpus
    return total


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """Devices a DRA driver publishes on one node, or network-attached devices (`reach`).

    Device classes are taken to select every device (their CEL selectors are not modelled; KAI's
    test fakes create them empty), so any claim may use any device of its pod's node."""

    name: str
    node: str
    driver: str
    devices: tuple[str, ...]
    #: The resource pool, "" = the node name (a claim's allocation names devices `pool/device`).
    pool: str = ""
    #: Network-attached devices (`node` is ""): the nodes they are reachable from (a slice's
    #: `nodeSelector` or `allNodes`, resolved by the adapter); None = on `node`.
    reach: tuple[str, ...] | None = None

    def device_ids(self) -> list[str]:
        """The slice's devices as `pool/device`, the form of a claim's allocation results."""
        pool = self.pool or self.node
        return [f"{pool}/{d}" for d in self.devices]
