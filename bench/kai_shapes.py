"""The shapes of KAI's benchmark files as conformance scenarios (schema: data/conformance/README.md).

Every shape of KAI-Scheduler's Go benchmarks (commit 72de64fc, the snapshot of data/conformance/):

* `pkg/scheduler/actions/benchmark_test.go`: allocate (10/50, 50/200, 100/500 nodes/jobs, all
  pending), reclaim (10/50, 50/200, all running, nothing pending), preempt and consolidation
  (10/50, 50/200, "mixed": every even job running on node `i mod N`, every odd one pending), full
  cycle (mixed 10/50, 50/200, 100/500; the five actions in one session), many queues (allocate,
  50 nodes, 200 jobs, 20 queues), gang (allocate, 50 nodes, 100 jobs x 4 tasks).
* `pkg/scheduler/actions/integration_tests/reclaim/reclaim_benchmark_test.go` "reclaim large jobs"
  (`reclaim-large-spread`): N nodes x 8 GPUs, 8N running 1-GPU jobs of `queue-0` (quota 0), job i
  on node `i mod N`; one pending gang of N/10 tasks x 8 GPUs in `queue-1` (quota 8N).
  `reclaim-large-packed` is the same with job i on node `i // 8` (not one of KAI's files; the shape
  shoal's bench used to run).

A scenario is written with its `derived` block (the effective inputs KAI's test fakes build, so
shoal's loader runs it without the oracle) and a `generator` block; `kai-oracle run` reads the very
same file. Both benchmarks name nodes, queues and jobs as KAI's Go code does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KAI_COMMIT = "72de64fc8eca10fa8cca26a20156178f3edbe092"
BENCH_FILE = "pkg/scheduler/actions/benchmark_test.go"
RECLAIM_FILE = "pkg/scheduler/actions/integration_tests/reclaim/reclaim_benchmark_test.go"
FIVE_ACTIONS = ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]
TRAIN = 50  # constants.PriorityTrainNumber

#: KAI's default plugins (data/conformance/kai/_index.yaml), predicates included: every benchmark
#: scenario has `mocks.cache_requirements`.
PLUGINS: list[dict[str, Any]] = [{"name": n} for n in (
    "predicates", "proportion", "priority", "elastic", "kubeflow", "ray", "nodeavailability",
    "gpusharingorder", "gpupack", "resourcetype", "subgrouporder", "taskorder", "nominatednode",
    "dynamicresources")] + [
    {"name": "nodeplacement", "arguments": {"cpu": "binpack", "gpu": "binpack"}},
    {"name": "minruntime"}, {"name": "topology"}, {"name": "snapshot"}]


@dataclass(frozen=True, slots=True)
class Case:
    """One benchmark point: KAI's Go benchmark function, the shape and its size."""

    shape: str
    go_benchmark: str
    nodes: int
    jobs: int = 0
    extra: int = 0  # queues (many-queues) or tasks per job (gang)

    @property
    def key(self) -> str:
        return f"{self.shape}/{self.nodes}"

    @property
    def size(self) -> str:
        if self.shape.startswith("reclaim-large"):
            return f"{self.nodes} nodes"
        more = {"many-queues": f", {self.extra} queues", "gang": f" x {self.extra} tasks"}.get(self.shape, "")
        return f"{self.nodes}n/{self.jobs}j{more}"


def _q(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _queue(name: str, parent: str, deserved: float, weight: float | None) -> dict[str, Any]:
    q: dict[str, Any] = {"name": name}
    if parent:
        q["parent_queue"] = parent
    q["deserved_gpus"] = _q(deserved)
    if weight:
        q["gpu_over_quota_weight"] = _q(weight)
    return q


def _job(name: str, queue: str, gpus: int, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    for i, t in enumerate(tasks):
        t["name"] = f"{name}-{i}"
    return {"name": name, "queue_name": queue, "priority": TRAIN, "required_gpus_per_task": gpus,
            "tasks": [{"name": t.pop("name"), **t} for t in tasks]}


def _pending() -> dict[str, Any]:
    return {"state": "Pending"}


def _running(node: str) -> dict[str, Any]:
    return {"state": "Running", "node_name": node}


def _four_queues(total: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    quarter = total / 4
    queues = [_queue(f"queue-{i}", "dept-a" if i < 2 else "dept-b", quarter, 1) for i in range(4)]
    return queues, [{"name": "dept-a", "deserved_gpus": _q(total / 2)},
                    {"name": "dept-b", "deserved_gpus": _q(total / 2)}]


def _nodes(n: int, fmt: str) -> list[dict[str, Any]]:
    return [{"name": fmt.format(i), "gpus": 8} for i in range(n)]


def _mocks(binds: int = 0, evictions: int = 0, pipelines: int = 0) -> dict[str, Any]:
    cr = {"number_of_cache_binds": binds, "number_of_cache_evictions": evictions,
          "number_of_pipeline_actions": pipelines}
    return {"cache_requirements": {k: v for k, v in cr.items() if v}}


def _all_pending(c: Case) -> dict[str, Any]:  # createBenchmarkTopology
    queues, depts = _four_queues(c.nodes * 8)
    jobs = [_job(f"job-{i}", f"queue-{i % 4}", 1, [_pending()]) for i in range(c.jobs)]
    return {"nodes": _nodes(c.nodes, "node-{}"), "queues": queues, "departments": depts, "jobs": jobs,
            "mocks": _mocks(binds=c.jobs * 2)}


def _all_running(c: Case) -> dict[str, Any]:  # createBenchmarkTopologyWithRunningJobs
    queues, depts = _four_queues(c.nodes * 8)
    jobs = [_job(f"job-{i}", f"queue-{i % 4}", 1, [_running(f"node-{i % c.nodes}")]) for i in range(c.jobs)]
    return {"nodes": _nodes(c.nodes, "node-{}"), "queues": queues, "departments": depts, "jobs": jobs,
            "mocks": _mocks(binds=c.jobs * 2, evictions=c.jobs)}


def _mixed(c: Case) -> dict[str, Any]:  # createBenchmarkTopologyWithMixedJobs
    queues, depts = _four_queues(c.nodes * 8)
    jobs = [_job(f"job-{i}", f"queue-{i % 4}", 1,
                 [_running(f"node-{i % c.nodes}") if i % 2 == 0 else _pending()]) for i in range(c.jobs)]
    return {"nodes": _nodes(c.nodes, "node-{}"), "queues": queues, "departments": depts, "jobs": jobs,
            "mocks": _mocks(binds=c.jobs * 2, evictions=c.jobs, pipelines=c.jobs * 2)}


def _many_queues(c: Case) -> dict[str, Any]:  # createBenchmarkTopologyWithManyQueues
    total, nq = c.nodes * 8, c.extra
    ndepts = max((nq + 3) // 4, 1)
    queues = [_queue(f"queue-{i}", f"dept-{i % ndepts}", total / nq, 1) for i in range(nq)]
    depts = [{"name": f"dept-{i}", "deserved_gpus": _q(total / ndepts)} for i in range(ndepts)]
    jobs = [_job(f"job-{i}", f"queue-{i % nq}", 1, [_pending()]) for i in range(c.jobs)]
    return {"nodes": _nodes(c.nodes, "node-{}"), "queues": queues, "departments": depts, "jobs": jobs,
            "mocks": _mocks(binds=c.jobs * 2)}


def _gang(c: Case) -> dict[str, Any]:  # createBenchmarkTopologyWithGangJobs
    queues, depts = _four_queues(c.nodes * 8)
    jobs = [_job(f"job-{i}", f"queue-{i % 4}", 1, [_pending() for _ in range(c.extra)]) for i in range(c.jobs)]
    return {"nodes": _nodes(c.nodes, "node-{}"), "queues": queues, "departments": depts, "jobs": jobs,
            "mocks": _mocks(binds=c.jobs * c.extra * 2)}


def _reclaim_large(packed: bool) -> Callable[[Case], dict[str, Any]]:
    def build(c: Case) -> dict[str, Any]:  # buildReclaimTopology
        n = c.nodes
        jobs = [_job(f"running-job-{i}", "queue-0", 1, [_running(f"node{i // 8 if packed else i % n}")])
                for i in range(8 * n)]
        jobs.append(_job("very-large-job", "queue-1", 8, [_pending() for _ in range(n // 10)]))
        queues = [_queue("queue-0", "", 0, None), _queue("queue-1", "", 8 * n, None)]
        return {"nodes": _nodes(n, "node{}"), "queues": queues, "jobs": jobs,
                "mocks": _mocks(binds=4 * n, evictions=4 * n, pipelines=4 * n)}
    return build


#: shape -> (builder, scenario kind, actions, KAI source file)
SHAPES: dict[str, tuple[Callable[[Case], dict[str, Any]], str, list[str], str]] = {
    "allocate": (_all_pending, "allocate", ["allocate"], BENCH_FILE),
    "reclaim": (_all_running, "reclaim", ["reclaim"], BENCH_FILE),
    "preempt": (_mixed, "preempt", ["preempt"], BENCH_FILE),
    "consolidation": (_mixed, "consolidation", ["consolidation"], BENCH_FILE),
    # KAI's benchmarkFullCycle: one session running the five actions (not the corpus's multi-round
    # `full_cycle` harness), hence kind `allocate` with the five actions listed.
    "full-cycle": (_mixed, "allocate", FIVE_ACTIONS, BENCH_FILE),
    "many-queues": (_many_queues, "allocate", ["allocate"], BENCH_FILE),
    "gang": (_gang, "allocate", ["allocate"], BENCH_FILE),
    "reclaim-large-spread": (_reclaim_large(False), "reclaim", ["reclaim"], RECLAIM_FILE),
    "reclaim-large-packed": (_reclaim_large(True), "reclaim", ["reclaim"], RECLAIM_FILE),
}

LARGE_SIZES = (100, 200, 500, 1000)

#: Every point of KAI's benchmark files (reclaim-large: the sizes of issue #12; KAI's file also has
#: 10 and 50 nodes).
CASES: list[Case] = [
    Case("allocate", "BenchmarkAllocateAction_SmallCluster", 10, 50),
    Case("allocate", "BenchmarkAllocateAction_MediumCluster", 50, 200),
    Case("allocate", "BenchmarkAllocateAction_LargeCluster", 100, 500),
    Case("reclaim", "BenchmarkReclaimAction_SmallCluster", 10, 50),
    Case("reclaim", "BenchmarkReclaimAction_MediumCluster", 50, 200),
    Case("preempt", "BenchmarkPreemptAction_SmallCluster", 10, 50),
    Case("preempt", "BenchmarkPreemptAction_MediumCluster", 50, 200),
    Case("consolidation", "BenchmarkConsolidationAction_SmallCluster", 10, 50),
    Case("consolidation", "BenchmarkConsolidationAction_MediumCluster", 50, 200),
    Case("full-cycle", "BenchmarkFullSchedulingCycle_SmallCluster", 10, 50),
    Case("full-cycle", "BenchmarkFullSchedulingCycle_MediumCluster", 50, 200),
    Case("full-cycle", "BenchmarkFullSchedulingCycle_LargeCluster", 100, 500),
    Case("many-queues", "BenchmarkManyQueues_MediumCluster", 50, 200, 20),
    Case("gang", "BenchmarkGangScheduling_MediumCluster", 50, 100, 4),
    *(Case("reclaim-large-spread", f"BenchmarkReclaimLargeJobs_{n}Node", n) for n in LARGE_SIZES),
    *(Case("reclaim-large-packed", "(packed variant, not in KAI)", n) for n in LARGE_SIZES),
]


def scenario(c: Case, actions: list[str] | None = None) -> dict[str, Any]:
    """The scenario of one case; `actions` overrides the shape's (the oracle's no-op baseline)."""
    build, kind, shape_actions, source = SHAPES[c.shape]
    body = build(c)
    out: dict[str, Any] = {
        "schema_version": 1,
        "id": f"bench.{c.shape}-n{c.nodes}",
        "name": f"{c.go_benchmark} ({c.shape}, {c.size})",
        "kind": kind,
        "actions": list(actions or shape_actions),
        "generator": {"tool": "shoal bench/kai_shapes.py", "shape": c.shape, "nodes": c.nodes,
                      "based_on": f"{source} {c.go_benchmark}"},
        **body,
    }
    out["derived"] = derive(out)
    return out


def derive(sc: dict[str, Any]) -> dict[str, Any]:
    """The `derived` block (README §4) for the fields these shapes use: whole-GPU jobs of one
    priority with default CPU / memory, default 8-GPU nodes, queues with GPU quotas."""
    depts = sc.get("departments") or []
    default_dept = not depts
    hierarchy: list[dict[str, Any]] = []

    def entry(name: str, parent: str, offset: int, quota: float, limit: float, weight: float) -> dict[str, Any]:
        free = {"quota": -1, "limit": -1, "over_quota_weight": 1}
        return {"name": name, "parent_queue": parent, "priority": None, "creation_offset_minutes": offset,
                "resources": {"gpu": {"quota": _q(quota), "limit": _q(limit), "over_quota_weight": _q(weight)},
                              "cpu": dict(free), "memory": dict(free)}}

    for i, q in enumerate(sc["queues"]):
        parent = "default" if default_dept else q.get("parent_queue", "")
        hierarchy.append(entry(q["name"], parent, i, q["deserved_gpus"], q.get("max_allowed_gpus") or -1,
                               q.get("gpu_over_quota_weight", 0)))
    for i, d in enumerate(depts):
        hierarchy.append(entry(d["name"], "", i, d["deserved_gpus"], d.get("max_allowed_gpus") or -1,
                               d["deserved_gpus"]))
    if default_dept:
        hierarchy.append({**entry("default", "", 0, -1, -1, -1), "implicit": True})
    nodes = {}
    for nd in sc["nodes"]:
        g = nd["gpus"]
        nodes[nd["name"]] = {
            "allocatable": {"milli_cpu": 20_000_000, "memory": 20_000_000_000, "gpus": g, "pods": 110},
            "capacity": {"milli_cpu": 30_000_000, "memory": 30_000_000_000, "gpus": g, "pods": 110},
            "gpu_memory": 100, "max_task_num": 500,
            "labels": {"nvidia.com/gpu.count": str(g), "nvidia.com/gpu.memory": "100",
                       "node-role.kubernetes.io/mig-enabled": "false", "nvidia.com/mig.strategy": "",
                       "kai.scheduler/type": nd["name"]}}
    jobs = {}
    ranked = sorted(sc["jobs"], key=lambda j: -j["priority"])  # stable, as KAI's fake
    n = len(ranked)
    for r, j in enumerate(ranked):
        jobs[j["name"]] = {
            "preemptibility": "preemptible" if j["priority"] < 100 else "non-preemptible",
            "creation_rank": r, "creation_offset_minutes": -(n - r),
            "pod_sets": [{"name": "default", "min_available": len(j["tasks"]), "implicit": True}],
            "task_request": {"milli_cpu": 1000, "memory": 1_000_000_000, "gpus": j["required_gpus_per_task"],
                             "pods": 1}}
    return {"predicates_plugin_allowed": True, "plugins": PLUGINS, "default_department_added": default_dept,
            "queue_hierarchy": hierarchy, "nodes": nodes, "jobs": jobs}
