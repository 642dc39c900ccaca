"""Run a scenario on the core and check `expected` exactly as the corpus README §5-§6 says."""

from __future__ import annotations

import copy
import gzip
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shoal.conformance.loader import NOW, Scenario, ScenarioError, build_config, build_snapshot
from shoal.cycle import close_session, open_session, run_actions
from shoal.defaults import action_registry
from shoal.framework.session import Session
from shoal.model.resources import GPU_COL, MILLI
from shoal.model.status import ALLOCATED, PodStatus

FULL_CYCLE_ACTIONS = ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]


@dataclass(slots=True)
class Result:
    id: str
    kind: str
    outcome: str  # passed | failed | errored | skipped
    message: str = ""
    #: Process (CPU) seconds of the scenario's decisions: session open + actions, summed over the
    #: sessions that run actions (every round of a full cycle); loading and checking excluded.
    seconds: float = 0.0


@dataclass(slots=True)
class _Clock:
    """Process time spent deciding, accumulated over a scenario's sessions."""

    seconds: float = 0.0


#: libyaml's loader when PyYAML has it (generated scale scenarios run to 100k lines).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(path: Path) -> Scenario:
    """A scenario file, plain (`.yaml`) or gzipped (`.yaml.gz`)."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        data = yaml.load(raw, Loader=_YAML_LOADER)  # a safe loader (CSafeLoader or SafeLoader)
    except (yaml.YAMLError, gzip.BadGzipFile, EOFError) as err:
        raise ScenarioError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict) or "kind" not in data:
        raise ScenarioError(f"{path}: not a scenario (no `kind` field)")
    return parse(data, path.name.removesuffix(".gz").removesuffix(".yaml"), str(path))


def parse(data: dict[str, Any], stem: str, path: str = "") -> Scenario:
    """A scenario from its already-read mapping (which has a `kind`); `stem` is its id when the
    mapping has none."""
    kind = data["kind"]
    actions = FULL_CYCLE_ACTIONS if kind == "full_cycle" else list(data.get("actions") or [kind])
    sc = Scenario(id=str(data.get("id", stem)), kind=kind, actions=actions, data=data, path=path)
    sc.unsupported = unsupported_reason(sc)
    return sc


def unsupported_reason(sc: Scenario) -> str:
    """Why the scenario cannot run on this build (an action not registered), or ""."""
    available = set(action_registry())
    needed = [a for a in sc.actions if a not in available]
    return f"action(s) not implemented yet: {', '.join(needed)}" if needed else ""


def run(sc: Scenario) -> Result:
    if sc.unsupported:
        return Result(sc.id, sc.kind, "skipped", sc.unsupported)
    clock = _Clock()
    try:
        if sc.kind == "full_cycle":
            problems = _run_full_cycle(sc, clock)
        else:
            ssn, calls = _one_session(sc, None, clock)
            problems = check(sc, ssn, calls, 0)
    except Exception as err:  # a scenario crash is reported, never fatal to the run
        return Result(sc.id, sc.kind, "errored", f"{type(err).__name__}: {err}", clock.seconds)
    if problems:
        return Result(sc.id, sc.kind, "failed", "; ".join(problems[:6]), clock.seconds)
    return Result(sc.id, sc.kind, "passed", "", clock.seconds)


def decide(sc: Scenario) -> Session:
    """One untimed session of a one-session scenario (its actions run, the session closed), for
    tools that look past the pass/fail check: its tasks, nodes and decisions."""
    return _one_session(sc, None, None)[0]


#: A task's (status, node name) as decided.
Placement = tuple[str, str | None]


def cache_calls(ssn: Session) -> dict[str, int]:
    """The session's Bind / Evict / Pipeline calls, keyed as KAI's `max_cache_calls_per_session`."""
    d = ssn.decisions
    return {"binds": len(d.binds), "evictions": len(d.evictions), "pipelined": len(d.pipelines)}


def differing_tasks(sc: Scenario, ssn: Session | None = None) -> dict[str, tuple[Placement, Placement]]:
    """The tasks of a one-session scenario with KAI's decisions in `expected.tasks` whose status
    or node differs between KAI and shoal: uid -> (KAI's, shoal's), in uid order. A field KAI's
    runs varied on (left out of `expected`) counts as no difference. `ssn`: shoal's session on
    `sc` when the caller already decided it (None: decided here)."""
    ssn = decide(sc) if ssn is None else ssn
    out: dict[str, tuple[Placement, Placement]] = {}
    for uid, want in sorted(((sc.data.get("expected") or {}).get("tasks") or {}).items()):
        task = ssn.tasks.get(uid)
        if task is None:
            continue
        got = (task.status.title, ssn.nodes.names[task.node] if task.node >= 0 else None)
        status = want.get("status", got[0])
        node = want["node_name"] if "node_name" in want else (None if status == "Pending" else got[1])
        if got != (status, node):
            out[uid] = ((status, node), got)
    return out


def _one_session(sc: Scenario, jobs: list[dict[str, Any]] | None, clock: _Clock | None,
                 actions: list[str] | None = None) -> tuple[Session, dict[str, int]]:
    """One session on the scenario; its open + actions are timed on `clock` (None: not timed)."""
    snapshot, config = build_snapshot(sc, jobs), build_config(sc)
    started = time.process_time()
    ssn = open_session(snapshot, config)
    run_actions(ssn, sc.actions if actions is None else actions)
    if clock is not None:
        clock.seconds += time.process_time() - started
    close_session(ssn)
    return ssn, cache_calls(ssn)


def _write_back(sc: Scenario, jobs: list[dict[str, Any]], ssn: Session) -> list[dict[str, Any]]:
    """The next round's task states (README §6)."""
    out = copy.deepcopy(jobs)
    for raw in out:
        deleting = bool(raw.get("delete_job_in_test"))
        for i, t in enumerate(raw.get("tasks") or []):
            uid = t.get("name") or f"{raw['name']}-{i}"
            task = ssn.tasks.get(uid)
            if task is None:
                continue
            node = ssn.nodes.names[task.node] if task.node >= 0 else None
            st = task.status
            if st == PodStatus.BINDING:
                t.update(state="Running", node_name=node, gpu_groups=list(task.groups))
            elif st == PodStatus.PIPELINED or (st == PodStatus.RELEASING and not deleting):
                t.update(state="Pending")
                t.pop("node_name", None)
                t.pop("gpu_groups", None)
            else:
                t.update(state=st.title)
                if node is not None:
                    t.update(node_name=node, gpu_groups=list(task.groups))
    return out


def _run_full_cycle(sc: Scenario, clock: _Clock) -> list[str]:
    rounds = sc.data.get("rounds") or {}
    jobs = copy.deepcopy(sc.data.get("jobs") or [])
    fit_errors: dict[str, list[str]] = {}
    problems: list[str] = []
    for r in range(int(rounds.get("until_match", 2) or 2)):
        ssn, calls = _one_session(sc, jobs, clock)
        # KAI's cache mock limits every session, the rounds before the match included.
        problems += [f"round {r + 1}: {p}" for p in check_calls(sc, calls)]
        fit_errors = {uid: j.fit_errors for uid, j in ssn.jobs.items()}
        jobs = _write_back(sc, jobs, ssn)
    ssn, calls = _one_session(sc, jobs, None, actions=[])  # only to check: no decision to time
    for uid, errs in fit_errors.items():
        if uid in ssn.jobs:
            ssn.jobs[uid].fit_errors = errs
    problems += check(sc, ssn, calls, 0)
    for r in range(int(rounds.get("after_match", 5) or 5)):
        ssn, calls = _one_session(sc, jobs, clock)
        problems += [f"after round {r + 1}: {p}" for p in check(sc, ssn, calls, r + 1)]
        jobs = _write_back(sc, jobs, ssn)
        if problems:
            break
    return problems


def check(sc: Scenario, ssn: Session, calls: dict[str, int], round_no: int) -> list[str]:
    """Every expectation of the scenario against the session. Node names are exact, except in
    generated scenarios (a `generator` block): there a node may be swapped for another that KAI
    cannot tell from it (`node_equivalence_problems`)."""
    exp = sc.data.get("expected") or {}
    problems: list[str] = []
    exact_nodes = not sc.data.get("generator")
    for job_name, e in (exp.get("jobs") or {}).items():
        job = ssn.jobs.get(job_name)
        if job is None:
            problems.append(f"job {job_name}: not in session")
            continue
        problems += _check_tasks(f"job {job_name}", job.tasks, e, job, ssn.nodes.names, exact_nodes)
    ignored = set((sc.data.get("derived") or {}).get("ignored_expected_tasks") or [])
    for uid, e in (exp.get("tasks") or {}).items():
        task = ssn.tasks.get(uid)
        if task is None:
            if uid not in ignored:
                problems.append(f"task {uid}: not in session")
            continue
        problems += _check_tasks(f"task {uid}", [task], e, task.job, ssn.nodes.names, exact_nodes)
    if not exact_nodes:
        problems += node_equivalence_problems(sc, ssn)
    for node, e in (exp.get("nodes_resources") or {}).items():
        i = ssn.nodes.index.get(node)
        if i is None:
            problems.append(f"node {node}: not in session")
            continue
        for key, arr in (("releasing_gpus", ssn.nodes.releasing), ("idle_gpus", ssn.nodes.idle)):
            if key in e and abs(arr[i, GPU_COL] / MILLI - float(e[key])) > 1e-9:
                problems.append(f"node {node}: {key} {arr[i, GPU_COL] / MILLI:g} != {e[key]}")
    # Calls first: the message keeps only the first problems, and an over-eviction must show.
    return check_calls(sc, calls) + problems


def check_calls(sc: Scenario, calls: dict[str, int]) -> list[str]:
    """Binds / evictions / pipelines of one session against the mock's upper bounds (0 = none)."""
    limits = (sc.data.get("expected") or {}).get("max_cache_calls_per_session") or {}
    return [f"{calls[key]} {key} > allowed {limit}" for key, limit in limits.items()
            if key in calls and calls[key] > int(limit)]


def _check_tasks(what: str, tasks: list[Any], e: dict[str, Any], job: Any, names: list[str],
                 exact_nodes: bool = True) -> list[str]:
    out: list[str] = []

    def _node_name(t: Any) -> str | None:
        if t.node >= 0:
            return names[t.node]
        # A pod not placed in the session (finished, or pending with a node name) keeps its name.
        return t.pod.node if t.pod.node else None

    want = PodStatus.parse(e["status"]) if "status" in e else None
    if want is not None:
        bad = [f"{t.uid}={t.status.title}" for t in tasks if t.status != want]
        if bad:
            out.append(f"{what}: status want {want.title}, got {', '.join(bad)}")
    if e.get("node_name") and exact_nodes:
        bad = [f"{t.uid}@{_node_name(t)}" for t in tasks if _node_name(t) != e["node_name"]]
        if bad:
            out.append(f"{what}: node want {e['node_name']}, got {', '.join(bad)}")
    if "gpus_required" in e:
        got = sum(t.pod.gpu.milli for t in tasks) / MILLI
        if round(got, 2) != round(float(e["gpus_required"]), 2):
            out.append(f"{what}: gpus_required {got:g} != {e['gpus_required']}")
    if e.get("gpus_accepted"):
        got = sum(t.accepted_gpu if t.pod.gpu.is_shared else t.pod.gpu_quota_milli * (t.node >= 0)
                  for t in tasks) / MILLI
        if round(got, 2) != round(float(e["gpus_accepted"]), 2):
            out.append(f"{what}: gpus_accepted {got:g} != {e['gpus_accepted']}")
    if e.get("milli_cpu_required") and sum(t.pod.cpu_milli for t in tasks) != int(e["milli_cpu_required"]):
        out.append(f"{what}: milli_cpu_required mismatch")
    if e.get("memory_required") and sum(t.pod.memory for t in tasks) != int(e["memory_required"]):
        out.append(f"{what}: memory_required mismatch")
    if want is not None and want & ALLOCATED:
        if job.last_start_time is None:
            out.append(f"{what}: job has no last start time")
        elif (e.get("last_start_timestamp_older_than_seconds")
              and NOW - job.last_start_time < float(e["last_start_timestamp_older_than_seconds"])):
            out.append(f"{what}: last start time too recent")
    if "expected_error_message" in e:
        got = kai_detailed_message(job.fit_errors)
        if got != e["expected_error_message"]:
            out.append(f"{what}: error message {got!r} != {e['expected_error_message']!r}")
    return out




def _expected_nodes(sc: Scenario, ssn: Session) -> dict[str, str]:
    """Task uid -> the node KAI's expectation puts it on (task entries override job entries)."""
    exp = sc.data.get("expected") or {}
    want: dict[str, str] = {}
    for job_name, e in (exp.get("jobs") or {}).items():
        job = ssn.jobs.get(job_name)
        if job is not None and e.get("node_name"):
            want.update((t.uid, str(e["node_name"])) for t in job.tasks)
    for uid, e in (exp.get("tasks") or {}).items():
        if e.get("node_name"):
            want[uid] = str(e["node_name"])
        elif "status" in e:
            want.pop(uid, None)  # the task's own entry leaves its node open
    return want


def node_equivalence_problems(sc: Scenario, ssn: Session) -> list[str]:
    """Placements equal up to swapping nodes KAI cannot tell apart.

    Two nodes are interchangeable when their scenario entries are equal but for the name: KAI
    breaks ties between such nodes in Go map order, so which one gets a pod is an accident.
    The check: for each class of interchangeable nodes, the multiset of "tasks on the node" sets
    (tasks whose node KAI's expectation fixes) is the same for shoal and for KAI - i.e. some
    permutation of the class maps shoal's placement onto KAI's. Statuses are checked by name."""
    want = _expected_nodes(sc, ssn)
    spec: dict[str, str] = {}
    for raw in sc.data.get("nodes") or []:
        rest = {k: v for k, v in raw.items() if k != "name"}
        spec[str(raw["name"])] = yaml.safe_dump(rest, sort_keys=True)
    got: dict[str, str | None] = {}
    for uid in want:
        t = ssn.tasks.get(uid)
        if t is not None:
            got[uid] = ssn.nodes.names[t.node] if t.node >= 0 else (t.pod.node or None)
    problems: list[str] = []
    for cls in sorted(set(spec.values())):
        members = sorted(n for n, s in spec.items() if s == cls)
        kai = sorted(sorted(u for u in got if want[u] == n) for n in members)
        ours = sorted(sorted(u for u in got if got[u] == n) for n in members)
        if kai != ours:
            extra = [u for u in got if got[u] in members and want[u] not in members]
            missing = [u for u in got if want[u] in members and got[u] not in members]
            problems.append(f"nodes {members[0]}..({len(members)} alike): placements differ from KAI's "
                            f"beyond a swap of alike nodes (moved in: {extra[:5]}, moved out: {missing[:5]})")
    return problems


def kai_detailed_message(fit_errors: list[str]) -> str:
    """KAI's JobFitErrorsToDetailedMessage over the job's fit errors (detailed texts): one error
    keeps its reason (PodSchedulingErrors for the plain ones), several become 'Unable to
    schedule podgroup'; the texts are sorted, each on its own line ending with '.'."""
    if not fit_errors:
        return ""
    reason = "PodSchedulingErrors" if len(fit_errors) == 1 else "Unable to schedule podgroup"
    lines = sorted(f"\n{e}." for e in fit_errors)
    return f"\n{reason}." + "".join(lines)


def collect(paths: list[str]) -> list[Path]:
    """Scenario files (`.yaml`, `.yaml.gz`) from files and directories (recursively, `_index.yaml`
    excluded), sorted."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = [*path.rglob("*.yaml"), *path.rglob("*.yaml.gz")]
            out.extend(sorted(f for f in found if not f.name.startswith("_")))
        elif path.exists():
            out.append(path)
        else:
            raise ScenarioError(f"{p}: no such file or directory")
    return out
