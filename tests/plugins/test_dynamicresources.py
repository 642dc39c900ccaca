"""DRA (kai-spec §3.15): claimed GPUs count as whole GPUs for quota and fit; claim checks; node-bound devices."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

from shoal.conformance.loader import build_snapshot
from shoal.conformance.runner import load, run
from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot, Node, Pod, PodGroup, PodStatus, Queue, QueueResource
from shoal.model.dra import MAX_CLAIM_CONSUMERS, QUEUE_LABEL, ResourceClaim, ResourceSlice, pod_dra_gpus

NS = "ns"


def _claim(name: str, count: int = 1, device_class: str = "nvidia.com/gpu", queue: str | None = "q",
           reserved: int = 0) -> ResourceClaim:
    labels = {} if queue is None else {QUEUE_LABEL: queue}
    return ResourceClaim(name, NS, device_class, count, labels, reserved)


@pytest.mark.parametrize(("claims", "want"), [
    pytest.param([_claim("a", 2)], 2, id="gpu-class"),
    pytest.param([_claim("a", 2, device_class="fpga")], 0, id="other-class"),
    pytest.param([_claim("a", 1), _claim("b", 3)], 4, id="summed"),
])
def test_pod_dra_gpus(claims: list[ResourceClaim], want: int) -> None:
    index = {(c.namespace, c.name): c for c in claims}
    assert pod_dra_gpus(NS, (*(c.name for c in claims), "missing"), index) == want


def _run(claims: list[ResourceClaim], pods: int, node_gpus: int = 2, limit_gpus: int = -1
         ) -> list[str]:
    """Binds of one gang of `pods` pods, each referencing every claim."""
    names = tuple(c.name for c in claims)
    index = {(c.namespace, c.name): c for c in claims}
    gpus = pod_dra_gpus(NS, names, index)
    pod_list = [Pod(f"p{i}", f"p{i}", NS, "job", PodStatus.PENDING, cpu_milli=1000, memory=10**9,
                    resource_claims=names, dra_gpus=gpus) for i in range(pods)]
    node = Node("node0", {"cpu": 8000, "memory": 64 * 10**9, "nvidia.com/gpu": node_gpus, "pods": 110})
    queue = Queue("q", gpu=QueueResource(quota=-1, limit=limit_gpus * 1000 if limit_gpus >= 0 else -1))
    pg = PodGroup("job", "job", NS, "q", priority=50, preemptible=True, creation=0.0, min_member=pods)
    snap = ClusterSnapshot(now=1.0, nodes=[node], pods=pod_list, podgroups=[pg], queues=[queue],
                           resource_claims=index)
    result = run_cycle(snap, SchedulerConfig(actions=("allocate",)))
    return [b.pod for b in result.decisions.binds]


@pytest.mark.parametrize(("claims", "pods", "node_gpus", "limit", "binds"), [
    pytest.param([_claim("c", 2)], 1, 2, -1, 1, id="fits"),
    pytest.param([_claim("c", 2)], 1, 1, -1, 0, id="too-many-devices"),
    pytest.param([_claim("c", 2)], 1, 2, 1, 0, id="over-queue-limit"),
    pytest.param([_claim("c", 2, device_class="fpga", queue=None)], 1, 0, 1, 1, id="non-gpu-claim-is-free"),
    pytest.param([_claim("c", 1, queue="other")], 1, 2, -1, 0, id="shared-claim-wrong-queue"),
    pytest.param([_claim("c", 0, reserved=MAX_CLAIM_CONSUMERS - 1)], 1, 2, -1, 1, id="last-consumer-place"),
    pytest.param([_claim("c", 0, reserved=MAX_CLAIM_CONSUMERS - 2)], 3, 2, -1, 0, id="gang-over-max-consumers"),
    pytest.param([_claim("c", 0, reserved=MAX_CLAIM_CONSUMERS)], 1, 2, -1, 0, id="claim-full"),
])
def test_dra_gang(claims: list[ResourceClaim], pods: int, node_gpus: int, limit: int, binds: int) -> None:
    assert len(_run(claims, pods, node_gpus, limit)) == binds


def test_unknown_claim_keeps_the_pod_pending() -> None:
    pod = Pod("p", "p", NS, "job", PodStatus.PENDING, cpu_milli=1000, memory=10**9, resource_claims=("nope",))
    pg = PodGroup("job", "job", NS, "q", priority=50, preemptible=True, creation=0.0)
    node = Node("node0", {"cpu": 8000, "memory": 64 * 10**9, "pods": 110})
    snap = ClusterSnapshot(now=1.0, nodes=[node], pods=[pod], podgroups=[pg], queues=[Queue("q")])
    result = run_cycle(snap, SchedulerConfig(actions=("allocate",)))
    assert not result.decisions.binds
    assert any("resource claim ns/nope not found" in e for e in result.session.jobs["job"].fit_errors)


# -- node-bound devices (ResourceSlices) ------------------------------------------------------

def _device_world(slices: dict[str, int], jobs: dict[str, list[tuple[str, ...]]], node_gpus: int = 0,
                  device_class: str = "nvidia.com/gpu", allocated: dict[str, tuple[str, ...]] | None = None,
                  running: dict[str, str] | None = None) -> ClusterSnapshot:
    """Nodes with `slices[node]` DRA devices (and `node_gpus` device-plugin GPUs); gangs of pods, one
    pod per tuple of claim names (each claim asks one device); claims allocated / pods running."""
    allocated = allocated or {}
    running = running or {}
    names = sorted({c for pods in jobs.values() for claims in pods for c in claims})
    index = {(NS, c): ResourceClaim(c, NS, device_class, 1, {QUEUE_LABEL: "q"}, from_template=True,
                                    allocated=allocated.get(c, ())) for c in names}
    snap = ClusterSnapshot(now=1.0, queues=[Queue("q")], resource_claims=index,
                           resource_slices=[ResourceSlice(f"{n}-slice", n, "gpu.example.com",
                                                          tuple(str(k) for k in range(count)))
                                            for n, count in slices.items()])
    for n, count in slices.items():
        snap.nodes.append(Node(n, {"cpu": 8000, "memory": 64 * 10**9, "nvidia.com/gpu": node_gpus + count,
                                   "pods": 110}))
    for k, (job, pods) in enumerate(jobs.items()):
        snap.podgroups.append(PodGroup(job, job, NS, "q", priority=50, preemptible=True, creation=float(k),
                                       min_member=len(pods)))
        for i, claims in enumerate(pods):
            uid = f"{job}-{i}"
            node = running.get(uid)
            snap.pods.append(Pod(uid, uid, NS, job, PodStatus.RUNNING if node else PodStatus.PENDING,
                                 cpu_milli=1000, memory=10**9, node=node, resource_claims=claims,
                                 dra_gpus=pod_dra_gpus(NS, claims, index), creation=float(k)))
    return snap


def _placed(snap: ClusterSnapshot, *actions: str) -> dict[str, str]:
    d = run_cycle(snap, SchedulerConfig(actions=actions or ("allocate",))).decisions
    return {b.pod: b.node for b in (*d.binds, *d.pipelines)}


@pytest.mark.parametrize(("device_class", "node_gpus"), [
    pytest.param("nvidia.com/gpu", 1, id="gpu-claims-on-a-node-with-a-device-plugin-gpu-too"),
    pytest.param("fpga.example.com", 0, id="non-gpu-claims"),
])
def test_gang_cannot_share_one_node_bound_device(device_class: str, node_gpus: int) -> None:
    """Issue #12: two pods of one gang, each with its own claim, and one device on x: the second pod
    must see the device the first took in the same statement, so the gang stays pending."""
    snap = _device_world({"x": 1}, {"gang": [("c0",), ("c1",)]}, node_gpus, device_class)
    assert _placed(snap) == {}
    assert any("not enough free DRA devices" in m for m in run_cycle(
        snap, SchedulerConfig(actions=("allocate",))).decisions.explanations["gang"].messages)


def test_two_devices_take_the_gang() -> None:
    snap = _device_world({"x": 2}, {"gang": [("c0",), ("c1",)]}, device_class="fpga.example.com")
    assert _placed(snap) == {"gang-0": "x", "gang-1": "x"}


def test_a_shared_claim_is_one_device_for_all_its_pods() -> None:
    snap = _device_world({"x": 1}, {"gang": [("shared",), ("shared",)]}, device_class="fpga.example.com")
    assert _placed(snap) == {"gang-0": "x", "gang-1": "x"}


def test_a_shared_claim_keeps_its_pods_on_its_node() -> None:
    """The claim is held on y by a running pod: a new pod of it goes to y, though x ties with y
    (one running pod each) and wins ties by name."""
    snap = _device_world({"x": 3, "y": 1}, {"busy": [("own",)], "run": [("shared",)], "new": [("shared",)]},
                         device_class="fpga.example.com", allocated={"own": ("x/0",), "shared": ("y/0",)},
                         running={"busy-0": "x", "run-0": "y"})
    assert _placed(snap) == {"new-0": "y"}


def test_rolled_back_gang_frees_its_device() -> None:
    """The gang took x's device for its first pod, failed and rolled back: a later job gets it."""
    snap = _device_world({"x": 1}, {"gang": [("c0",), ("c1",)], "solo": [("c2",)]},
                         device_class="fpga.example.com")
    assert _placed(snap) == {"solo-0": "x"}


def test_running_claims_hold_their_devices_until_evicted() -> None:
    """x's only device is allocated to a running pod's claim: nothing is left for a new claim."""
    snap = _device_world({"x": 1}, {"run": [("c0",)], "new": [("c1",)]}, device_class="fpga.example.com",
                         allocated={"c0": ("x/0",)}, running={"run-0": "x"})
    assert _placed(snap) == {}


def test_kai_scenario_two_template_claims_one_slice_device() -> None:
    """KAI's 'requesting too many devices' scenario reshaped as the issue's case: a gang of two pods,
    each with its own one-device claim of a non-GPU class, one slice device on node0: KAI's
    allocator finds no device for the second claim, so nothing binds."""
    sc = load(Path(__file__).resolve().parents[2] / "data" / "conformance" / "kai" /
              "it.allocate.allocate_dra--simple-pod-with-simple-resource-claim-requesting-too-many-devices.yaml")
    d = copy.deepcopy(sc.data)
    d["jobs"][0]["tasks"] = [{"name": f"pending_job0-{i}", "state": "Pending", "resource_claim_names": [f"c{i}"]}
                             for i in range(2)]
    claim = {**d["dra"]["resource_claims"][0], "device_class_name": "fpga.example.com", "count": 1}
    d["dra"]["resource_claims"] = [{**claim, "name": f"c{i}"} for i in range(2)]
    d["derived"]["jobs"]["pending_job0"]["pod_sets"][0]["min_available"] = 2
    d["mocks"]["cache_requirements"]["number_of_cache_binds"] = 0
    d["expected"]["max_cache_calls_per_session"]["binds"] = 0
    sc.data = d
    assert [sl.devices for sl in build_snapshot(sc).resource_slices] == [("0",)]
    result = run(sc)
    assert result.outcome == "passed", result.message


# -- network-attached devices (a slice's `reach`) ---------------------------------------------

FPGA = "fpga.example.com"


def _network(snap: ClusterSnapshot, reach: tuple[str, ...], n: int = 1) -> None:
    """A network-attached slice of `n` devices (`rack/0`…) reachable from the `reach` nodes."""
    snap.resource_slices.append(ResourceSlice("rack", "", FPGA, tuple(str(k) for k in range(n)), pool="rack",
                                              reach=reach))


def test_a_claim_only_network_devices_satisfy_goes_where_they_reach() -> None:
    snap = _device_world({"x": 0, "y": 0}, {"solo": [("c0",)]}, device_class=FPGA)
    assert _placed(snap) == {}  # no device anywhere
    _network(snap, ("y",))
    assert _placed(snap) == {"solo-0": "y"}


def test_a_network_device_reaching_two_nodes_counts_once() -> None:
    snap = _device_world({"x": 0, "y": 0}, {"a": [("c0",)], "b": [("c1",)]}, device_class=FPGA)
    _network(snap, ("x", "y"))
    assert len(_placed(snap)) == 1
    snap.resource_slices = [sl for sl in snap.resource_slices if sl.reach is None]
    _network(snap, ("x", "y"), n=2)
    assert sorted(_placed(snap)) == ["a-0", "b-0"]


def test_a_node_takes_its_own_devices_first_then_network_ones() -> None:
    """A gang of three one-device claims: x has two devices of its own and reaches one network device."""
    snap = _device_world({"x": 2}, {"gang": [("c0",), ("c1",), ("c2",)]}, device_class=FPGA)
    assert _placed(snap) == {}
    _network(snap, ("x",))
    assert _placed(snap) == {"gang-0": "x", "gang-1": "x", "gang-2": "x"}


def test_a_claim_allocated_to_a_network_device_holds_it() -> None:
    snap = _device_world({"x": 0, "y": 0}, {"run": [("c0",)], "new": [("c1",)]}, device_class=FPGA,
                         allocated={"c0": ("rack/0",)}, running={"run-0": "x"})
    _network(snap, ("x", "y"))
    assert _placed(snap) == {}  # the running pod's claim holds the only network device
    snap.pods = [p for p in snap.pods if p.uid != "run-0"]  # a claim of pods we do not schedule: as allocated
    assert _placed(snap) == {}
    snap.resource_claims[(NS, "c0")] = dataclasses.replace(snap.resource_claims[(NS, "c0")], allocated=())
    assert set(_placed(snap).values()) <= {"x", "y"} and len(_placed(snap)) == 1


def test_a_picky_claim_goes_where_a_network_device_it_accepts_is() -> None:
    snap = _device_world({"x": 2, "y": 0}, {"solo": [("c0",)]}, device_class=FPGA)
    _network(snap, ("y",))
    snap.resource_claims[(NS, "c0")] = dataclasses.replace(snap.resource_claims[(NS, "c0")], eligible=("rack/0",))
    assert _placed(snap) == {"solo-0": "y"}
    snap.resource_claims[(NS, "c0")] = dataclasses.replace(snap.resource_claims[(NS, "c0")], eligible=("x/0",))
    assert _placed(snap) == {"solo-0": "x"}


def test_a_gpu_claim_only_network_devices_satisfy_counts_no_gpus_of_the_node() -> None:
    net = ResourceClaim("c", NS, "nvidia.com/gpu", 2, network=True)
    assert net.gpus == 0 and dataclasses.replace(net, network=False).gpus == 2


def test_a_claim_reserved_for_a_pod_not_ours_keeps_our_pod_where_it_is_allocated() -> None:
    """A pod of another scheduler holds the shared claim on y: our pod using it must go to y (the
    binder would refuse x), though x has free devices and wins ties by name."""
    snap = _device_world({"x": 2, "y": 1}, {"new": [("shared",)]}, device_class=FPGA)
    key = (NS, "shared")
    snap.resource_claims[key] = dataclasses.replace(snap.resource_claims[key], allocated=("y/0",), reserved_for=1)
    assert _placed(snap) == {"new-0": "x"}  # whom it is reserved for unknown (KAI's view): ours, evicted
    snap.resource_claims[key] = dataclasses.replace(snap.resource_claims[key], reserved_by=("uid-elsewhere",))
    assert _placed(snap) == {"new-0": "y"}
    snap.resource_claims[key] = dataclasses.replace(snap.resource_claims[key], reserved_by=("new-0",))
    assert _placed(snap) == {"new-0": "x"}  # reserved for our own pod only: it holds nothing while pending
