"""Scheduling shards: which objects a shard sees, what it names, what its cycle decides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shoal.cli.main import main
from shoal.cycle import run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.kube.cache import ClusterCache
from shoal.kube.grouper import PodGrouper
from shoal.kube.shard import DEFAULT_NODE_POOL_LABEL, Shard

from .fake_api import FakeApi
from .test_cache import SCHED, node, pod, queue
from .test_grouper import JOB_PATH, POD_PATH, owned_pod

KEY = "pool"


def labelled(obj: dict[str, Any], pool: str | None) -> dict[str, Any]:
    labels = obj["metadata"].setdefault("labels", {})
    if pool is not None:
        labels[KEY] = pool
    return obj


def podgroup(name: str, queue_name: str, pool: str | None, size: int = 1) -> dict[str, Any]:
    return labelled({"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
                     "spec": {"minMember": size, "queue": queue_name}}, pool)


def test_selection_follows_kai_node_pools() -> None:
    a, default, whole = Shard(KEY, "a"), Shard(KEY), Shard()
    assert a.matches({KEY: "a"}) and not a.matches({KEY: "b"}) and not a.matches({})
    assert default.matches({}) and default.matches(None) and not default.matches({KEY: "a"})
    assert whole.matches({KEY: "b"}) and not whole.active
    assert (a.selector(), default.selector(), whole.selector()) == ("pool=a", "!pool", None)
    assert (a.component("kai-scheduler"), default.component("kai-scheduler")) == ("kai-scheduler-a",
                                                                                   "kai-scheduler")


@pytest.mark.parametrize("args", [("", "a"), ("bad key!", "a"), (KEY, "-a"), (KEY, "x" * 64)])
def test_bad_shards_are_refused(args: tuple[str, str]) -> None:
    with pytest.raises(ValueError):
        Shard(*args)


def test_guard_delivers_objects_entering_and_leaving_the_pool() -> None:
    seen: list[tuple[str, str | None, str | None]] = []

    def handler(kind: str, old: Any, new: Any) -> None:
        seen.append((kind, old and old["metadata"]["labels"].get(KEY), new and new["metadata"]["labels"].get(KEY)))

    guarded = Shard(KEY, "a").guard(handler)
    a, b = labelled(node("n1"), "a"), labelled(node("n1"), "b")
    guarded("ADDED", None, b)          # another pool's: not seen
    guarded("MODIFIED", b, a)          # relabelled into the pool: an addition
    guarded("MODIFIED", a, a)
    guarded("MODIFIED", a, b)          # relabelled out: a deletion
    guarded("DELETED", b, None)        # gone while in another pool: not seen
    assert seen == [("ADDED", None, "a"), ("MODIFIED", "a", "a"), ("DELETED", "a", None)]
    assert Shard().guard(handler) is handler


def shard_cache(shard: Shard, events: list[tuple[str, dict[str, Any]]]) -> ClusterCache:
    """A cache fed as the service feeds it: nodes, queues and PodGroups through the shard's guard."""
    c = ClusterCache(SCHED, lambda: 1000.0)
    handlers = {"node": shard.guard(c.on_node), "queue": shard.guard(c.on_queue),
                "podgroup": shard.guard(c.on_podgroup), "pod": c.on_pod}
    for kind, obj in events:
        handlers[kind]("ADDED", None, obj)
    return c


def test_two_shards_each_bind_only_their_pool_on_their_nodes() -> None:
    other = pod("other-sched", gpus=2, scheduler="kube", node_name="b1")  # fills b1 for shard b only
    events = [("node", labelled(node("a1", gpus=2), "a")), ("node", labelled(node("b1", gpus=2), "b")),
              ("node", labelled(node("b2", gpus=3), "b")),
              ("queue", labelled(queue("qa"), "a")), ("queue", labelled(queue("qb"), "b")),
              ("podgroup", podgroup("ga", "qa", "a", 2)), ("podgroup", podgroup("gb", "qb", "b", 2)),
              ("podgroup", podgroup("big", "qa", "a", 3)),  # 3 GPUs: pool a has 2, pool b has free ones
              ("pod", other)]
    for name, pg, size in (("ga", "ga", 2), ("gb", "gb", 2), ("big", "big", 3)):
        events += [("pod", pod(f"{name}-{i}", annotations={"pod-group-name": pg}, queue="q" + name[-1]))
                   for i in range(size)]
    events += [("pod", labelled(pod("solo-a", queue="qa"), "a")), ("pod", labelled(pod("solo-b", queue="qb"), "b"))]
    bound: dict[str, dict[str, str]] = {}
    for pool in ("a", "b"):
        shard = Shard(KEY, pool)
        snap = shard.narrow(shard_cache(shard, events).snapshot())
        assert {n.name for n in snap.nodes} == ({"a1"} if pool == "a" else {"b1", "b2"})
        assert set(snap.other_used) == (set() if pool == "a" else {"b1"})
        d = run_cycle(snap, SchedulerConfig()).decisions
        bound[pool] = {b.name: b.node for b in d.binds}
        assert not d.evictions
    assert bound["a"] == {"ga-0": "a1", "ga-1": "a1"}  # solo-a waits: ga took both GPUs; big never fits
    assert bound["b"] == {"gb-0": "b2", "gb-1": "b2", "solo-b": "b2"}  # b1 is full of another scheduler's pod


def test_default_shard_owns_the_unlabelled_objects() -> None:
    events = [("node", node("n0")), ("node", labelled(node("a1"), "a")), ("queue", queue("q")),
              ("pod", pod("plain")), ("pod", labelled(pod("pooled"), "a"))]
    snap = Shard(KEY).narrow(shard_cache(Shard(KEY), events).snapshot())
    assert [n.name for n in snap.nodes] == ["n0"]
    assert [p.name for p in snap.pods] == ["plain"]
    assert [b.name for b in run_cycle(snap, SchedulerConfig()).decisions.binds] == ["plain"]


async def test_grouper_groups_only_its_pools_pods_and_labels_their_podgroup() -> None:
    api = FakeApi()
    api.put(JOB_PATH, {"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": "train", "namespace": "ns", "uid": "job-uid"}, "spec": {}})
    mine = labelled(owned_pod(), "a")
    api.put(POD_PATH, mine)
    cache = ClusterCache(SCHED, lambda: 0.0)
    grouper = PodGrouper(api, cache, shard=Shard(KEY, "a"))
    grouper.on_pod("ADDED", None, labelled(pod("foreign"), "b"))
    grouper.on_pod("ADDED", None, pod("unlabelled"))
    grouper.on_pod("ADDED", None, mine)
    assert list(grouper.pending) == ["uid-a"]
    await grouper.group(mine)
    (created,) = api.sent("POST", "/podgroups")
    assert created.body["metadata"]["labels"][KEY] == "a"


async def test_unsharded_grouper_copies_kais_pool_label() -> None:
    api = FakeApi()
    api.put(JOB_PATH, {"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": "train", "namespace": "ns", "uid": "job-uid"}, "spec": {}})
    p = owned_pod()
    p["metadata"]["labels"][DEFAULT_NODE_POOL_LABEL] = "h100"
    api.put(POD_PATH, p)
    await PodGrouper(api, ClusterCache(SCHED, lambda: 0.0)).group(p)
    (created,) = api.sent("POST", "/podgroups")
    assert created.body["metadata"]["labels"][DEFAULT_NODE_POOL_LABEL] == "h100"


def test_run_refuses_a_bad_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--node-pool", "not a value", "--kubeconfig", str(tmp_path / "none")]) == 2
    assert "node pool 'not a value'" in capsys.readouterr().out
