"""shoal against KAI on the shapes of KAI's own benchmark files, like for like (issue #12).

Every point of `bench/kai_shapes.py` (KAI's `benchmark_test.go`: allocate, reclaim, preempt,
consolidation, full cycle, many queues, gang; `reclaim_benchmark_test.go` "reclaim large jobs" at
100 / 200 / 500 / 1,000 nodes in KAI's own spread layout, job i on node i mod N, and the packed
variant, job i on node i // 8) is generated as a conformance scenario and run by shoal's scenario
loader. Per row: shoal's evicted / placed / moved and its action time, KAI's same counts and action
time, the ratio, and a flag where the counts differ.

* evicted: running pods evicted (the moved ones included, as KAI's Evict calls count them);
  placed: pending pods pipelined, allocated or bound; moved: evicted pods pipelined elsewhere.
* shoal's time: process time (`time.process_time`) of the actions alone under `paused_gc` (as the
  service runs cycles), median of `--repeat` runs; the session open is printed beside it.
* KAI's figures: without an oracle they are read from `bench/data/kai_reference.json` (measured
  with `kai-oracle`, KAI's scheduler code behind a CLI; the file says when, on which KAI commit,
  at which machine load and how). With `--kai-oracle PATH` (or `$KAI_ORACLE`) KAI runs the very
  same scenario files in this run: KAI's action-only time is the oracle's CPU time (user + sys of
  the child process) on the scenario minus its CPU time on the same scenario with a no-op action
  (`stalegangeviction`, nothing stale), medians of `--kai-repeat` runs each; that removes parsing,
  session building and the ~0.1 s informer cache-sync poll. shoal's decisions are then also
  checked against KAI's (`shoal.conformance.runner.check`: every pod's status, nodes up to a swap
  of alike nodes, cache-call limits) - column `same`.

    python bench/bench_reclaim.py [--only SHAPE[/NODES],...] [--repeat 3]
                                  [--kai-oracle PATH [--kai-repeat 3] [--record FILE] [--work DIR]]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kai_shapes import CASES, KAI_COMMIT, Case, scenario
from shoal.conformance import runner
from shoal.conformance.loader import Scenario, build_config, build_snapshot
from shoal.cycle import close_session, open_session, paused_gc, run_actions
from shoal.framework.session import Session
from shoal.model.status import ACTIVE_ALLOCATED, PodStatus

REFERENCE = Path(__file__).resolve().parent / "data" / "kai_reference.json"
PLACED = PodStatus.ALLOCATED | PodStatus.PIPELINED | PodStatus.BINDING | PodStatus.BOUND | PodStatus.RUNNING
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True, slots=True)
class Counts:
    evicted: int
    placed: int
    moved: int

    def __str__(self) -> str:
        return f"{self.evicted}/{self.placed}/{self.moved}"


def outcome(pods: list[tuple[str, PodStatus, PodStatus]]) -> tuple[Counts, str]:
    """(pod, status before, status after) per pod -> the counts, and a digest of every pod whose
    status changed (equal digests: the same pods evicted, moved and placed)."""
    evicted = placed = moved = 0
    changed = []
    for uid, was, now in pods:
        if was != now:
            changed.append(f"{uid} {now.title}")
        if was & ACTIVE_ALLOCATED and now in (PodStatus.RELEASING, PodStatus.PIPELINED):
            evicted += 1
            moved += now == PodStatus.PIPELINED
        elif was == PodStatus.PENDING and now & PLACED:
            placed += 1
    digest = hashlib.sha256("\n".join(sorted(changed)).encode()).hexdigest()[:16]
    return Counts(evicted, placed, moved), digest


def session_outcome(ssn: Session) -> tuple[Counts, str]:
    return outcome([(t.uid, t.pod.status, t.status) for t in ssn.tasks.values()])


def kai_outcome(sc: dict[str, Any]) -> tuple[Counts, str]:
    """KAI's decisions, from the `expected` block `kai-oracle run` wrote."""
    exp = sc.get("expected") or {}
    jobs, tasks = exp.get("jobs") or {}, exp.get("tasks") or {}
    pods = []
    for job in sc["jobs"]:
        for t in job["tasks"]:
            after = (tasks.get(t["name"]) or {}).get("status") or (jobs.get(job["name"]) or {}).get("status")
            if after is None:  # left out: varied between the oracle's repeats
                raise RuntimeError(f"KAI's status of {t['name']} is not in the oracle's output")
            pods.append((t["name"], PodStatus.parse(t["state"]), PodStatus.parse(after)))
    return outcome(pods)


@dataclass(frozen=True, slots=True)
class Calls:
    """Bind / Evict / Pipeline calls of the session (KAI's cache mock counts the same)."""

    binds: int
    evictions: int
    pipelined: int

    def __str__(self) -> str:
        return f"{self.binds}/{self.evictions}/{self.pipelined}"

    def more_than(self, other: Calls) -> bool:
        return self.binds > other.binds or self.evictions > other.evictions or self.pipelined > other.pipelined


@dataclass(slots=True)
class ShoalRun:
    counts: Counts
    digest: str
    calls: Calls
    open_s: float
    action_s: float
    problems: list[str] | None = None  # against KAI's decisions, when the oracle ran


def run_shoal(data: dict[str, Any], repeat: int, kai_expected: dict[str, Any] | None) -> ShoalRun:
    sc = Scenario(id=data["id"], kind=data["kind"], actions=list(data["actions"]), data=data)
    opens, acts, seen = [], [], set()
    problems, calls = None, None
    for r in range(repeat):
        snap, config = build_snapshot(sc), build_config(sc)
        with paused_gc():
            c0 = time.process_time()
            ssn = open_session(snap, config)
            c1 = time.process_time()
            run_actions(ssn, sc.actions)
            c2 = time.process_time()
            close_session(ssn)
        opens.append(c1 - c0)
        acts.append(c2 - c1)
        d = ssn.decisions
        calls = Calls(len(d.binds), len(d.evictions), len(d.pipelines))
        seen.add((*session_outcome(ssn), calls))
        if r == 0 and kai_expected is not None:
            checked = Scenario(id=sc.id, kind=sc.kind, actions=sc.actions, data={**data, "expected": kai_expected})
            problems = runner.check(checked, ssn, {}, 0)  # statuses and nodes; calls are compared apart
        ssn.release()
    if len(seen) != 1:
        raise RuntimeError(f"{sc.id}: shoal's counts vary between runs: {seen}")
    c, digest, calls = seen.pop()
    return ShoalRun(c, digest, calls, statistics.median(opens), statistics.median(acts), problems)


def _oracle_once(oracle: str, path: Path, out: Path) -> tuple[float, float, dict[str, Any]]:
    """One `kai-oracle run --repeat 1`: (child CPU s, oracle wall_ms / 1000, the written scenario)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([oracle, "run", str(path), "--out", str(out), "--repeat", "1"],
                          capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"kai-oracle failed on {path.name} ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    written = yaml.load((out / path.name).read_text(), Loader=Loader)
    return cpu, written["oracle"]["wall_ms"] / 1000, written


def run_kai(oracle: str, case: Case, data: dict[str, Any], work: Path, repeat: int) -> dict[str, Any]:
    """KAI on the scenario and on its no-op twin, `repeat` times each; a reference row."""
    work.mkdir(parents=True, exist_ok=True)
    rec: dict[str, Any] = {"shape": case.shape, "nodes": case.nodes, "go_benchmark": case.go_benchmark,
                           "load_avg_1m_before": round(os.getloadavg()[0], 1)}
    results: dict[str, list[tuple[float, float]]] = {"act": [], "noop": []}
    expected, seen = None, set()
    for tag, actions in (("act", None), ("noop", ["stalegangeviction"])):
        path = work / f"{case.shape}-n{case.nodes}-{tag}.yaml"
        path.write_text(yaml.dump(data if actions is None else scenario(case, actions), Dumper=Dumper,
                                  sort_keys=False))
        for _ in range(repeat):
            cpu, wall, written = _oracle_once(oracle, path, work / "out")
            results[tag].append((cpu, wall))
            if tag == "act":
                expected = written["expected"]
                seen.add(kai_outcome(written))
                rec["kai_commit"] = written["oracle"].get("kai_commit")
                rec["cache_calls"] = written["oracle"].get("cache_calls")
    if len(seen) != 1:
        raise RuntimeError(f"{case.key}: KAI's counts vary between runs: {seen}")
    c, digest = seen.pop()
    med = {tag: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
           for tag, v in results.items()}
    spread = [max((max(x[i] for x in v) - min(x[i] for x in v)) for v in results.values()) for i in (0, 1)]
    rec.update(evicted=c.evicted, placed=c.placed, moved=c.moved, status_digest=digest,
               action_cpu_s=round(med["act"][0] - med["noop"][0], 3), noise_cpu_s=round(spread[0], 3),
               action_wall_s=round(med["act"][1] - med["noop"][1], 3), noise_wall_s=round(spread[1], 3),
               runs={tag: {"cpu_s": [round(x[0], 3) for x in v], "wall_s": [round(x[1], 3) for x in v]}
                     for tag, v in results.items()},
               date=datetime.date.today().isoformat(), load_avg_1m_after=round(os.getloadavg()[0], 1))
    rec["expected"] = expected
    return rec


def record(path: Path, key: str, row: dict[str, Any]) -> None:
    """Merge one measured row into the JSON at `path` (read afresh: other runs may have added rows)."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("rows", {})[key] = row
    data.update(
        about="KAI-Scheduler's decisions and action-only time on the shapes of bench/kai_shapes.py, "
              "measured with kai-oracle by bench/bench_reclaim.py --kai-oracle ... --record; "
              "action_cpu_s = median CPU (user+sys) of `kai-oracle run --repeat 1` on the scenario "
              "minus the same on the scenario with the no-op action stalegangeviction (parsing, "
              "session building and the ~0.1 s informer cache-sync poll cancel out); action_wall_s "
              "the same with the oracle's wall_ms; noise_cpu_s / noise_wall_s: the largest spread "
              "(max - min) of the runs of either variant; runs: every run's figures; status_digest: "
              "sha256 of the sorted 'pod status' lines of every pod whose status changed; "
              "load_avg_1m_*: the machine's load around the row",
        kai_commit=KAI_COMMIT, machine=f"{os.cpu_count()} cores shared with other jobs")
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def _fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    if x < 0:
        return "~0"
    return "<0.01" if x < 0.01 else f"{x:.2f}" if x < 10 else f"{x:.1f}"


@dataclass(slots=True)
class Row:
    """One printed row: shoal's figures beside KAI's, the ratio, the checks."""

    case: Case
    ours: ShoalRun
    kai: dict[str, Any] | None
    flags: list[str]
    same: str = "-"
    kai_time: str = "-"
    kai_wall: str = "-"
    ratio: str = "-"

    @property
    def kai_counts(self) -> Counts | None:
        return Counts(self.kai["evicted"], self.kai["placed"], self.kai["moved"]) if self.kai else None

    @property
    def kai_calls(self) -> Calls | None:
        return Calls(**self.kai["cache_calls"]) if self.kai else None

    def text(self) -> str:
        c, o = self.case, self.ours
        return (f"{c.shape:<21} {c.size:<19} {o.counts!s:>11} {o.calls!s:>11} {_fmt_s(o.open_s):>6} "
                f"{_fmt_s(o.action_s):>7} | {self.kai_counts!s:>11} {self.kai_calls!s:>11} {self.kai_time:>6} "
                f"{self.kai_wall:>6} | {self.ratio:>9} {self.same:<4} {', '.join(self.flags)}")

    def markdown(self) -> str:
        c, o = self.case, self.ours
        return (f"| {c.shape} | {c.size} | {o.counts} | {o.calls} | {_fmt_s(o.action_s)} | {self.kai_counts} | "
                f"{self.kai_calls} | {self.kai_time} | {self.ratio} | {self.same} | {', '.join(self.flags)} |")


HEAD = (f"{'shape':<21} {'size':<19} {'shoal e/p/m':>11} {'calls b/e/p':>11} {'open s':>6} {'shoal s':>7} | "
        f"{'KAI e/p/m':>11} {'calls b/e/p':>11} {'KAI s':>6} {'wall s':>6} | {'KAI/shoal':>9} {'same':<4} flag")
MD_HEAD = ("| shape | size | shoal e/p/m | calls b/e/p | shoal s | KAI e/p/m | calls b/e/p | KAI s | KAI/shoal | same "
           "| flag |\n|---|---|---|---|---:|---|---|---:|---:|---|---|")
LEGEND = ("e/p/m: pods evicted (moved ones included) / pending pods placed / victims moved (pipelined elsewhere); "
          "calls b/e/p: Bind / Evict / Pipeline calls; shoal s: actions' process time; KAI s: action-only CPU "
          "time ('~0': below the spread of the oracle runs), wall s: the same from the oracle's wall clock; "
          "same: yes = every decision equal to KAI's up to a swap of alike nodes (oracle run), pods = the same pods "
          "evicted / moved / placed as KAI's recorded run (nodes not recorded)")


#: Differences traced to KAI's own bookkeeping (docs/reclaim.md, "KAI artefacts"): (shape, nodes) ->
#: the flag they explain. Shown in the table, not counted as a difference from KAI.
KAI_ARTEFACTS: dict[tuple[str, int], tuple[str, str]] = {
    ("consolidation", 10): (
        "MORE CALLS THAN KAI",
        "KAI artefact: one Evict+Pipeline fewer because KAI re-pipelines a pipelined victim onto its own "
        "node with its resources counted free twice (node-6 holds 9 GPUs of pods on 8 until a later "
        "move); same pods evicted/moved/placed",
    ),
}


def compare(case: Case, ours: ShoalRun, kai: dict[str, Any] | None) -> Row:
    row = Row(case, ours, kai, [])
    if kai is None:
        row.flags.append("no KAI figure")
        return row
    if row.kai_counts != ours.counts:
        row.flags.append("COUNTS DIFFER")
    if row.kai_calls is not None and ours.calls.more_than(row.kai_calls):
        known = KAI_ARTEFACTS.get((case.shape, case.nodes))
        row.flags.append(known[1] if known and known[0] == "MORE CALLS THAN KAI" else "MORE CALLS THAN KAI")
    # KAI's action-only time is the difference of two noisy runs: below the spread of the runs it
    # is only known to be small.
    cpu, wall = kai["action_cpu_s"], kai["action_wall_s"]
    if cpu > max(kai.get("noise_cpu_s", 0.0), 0.005):
        row.kai_time = _fmt_s(cpu)
        row.ratio = f"x{cpu / ours.action_s:.1f}" if ours.action_s > 0 else "-"
    else:
        row.kai_time = "~0"
    row.kai_wall = _fmt_s(wall) if wall > max(kai.get("noise_wall_s", 0.0), 0.005) else "~0"
    if ours.problems is not None:  # the oracle ran: every decision checked
        row.same = "NO" if ours.problems else "yes"
    elif kai.get("status_digest"):  # recorded: which pods were evicted, moved, placed
        row.same = "pods" if kai["status_digest"] == ours.digest else "NO"
    if row.same == "NO":
        row.flags.append("decisions differ")
    return row


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated SHAPE or SHAPE/NODES (default: every row)")
    ap.add_argument("--repeat", type=int, default=3, help="shoal runs per row (median)")
    ap.add_argument("--kai-oracle", default=os.environ.get("KAI_ORACLE", ""), help="kai-oracle binary ($KAI_ORACLE)")
    ap.add_argument("--kai-repeat", type=int, default=3, help="oracle runs per row and per variant (median)")
    ap.add_argument("--reference", type=Path, default=REFERENCE, help="KAI's recorded figures (JSON)")
    ap.add_argument("--record", type=Path, help="with the oracle: merge KAI's measured rows into this JSON")
    ap.add_argument("--work", type=Path, help="with the oracle: where scenario files go (default: a temp dir)")
    ap.add_argument("--markdown", action="store_true", help="also print the table in Markdown")
    a = ap.parse_args(argv)
    wanted = [w for w in a.only.split(",") if w]
    cases = [c for c in CASES if not wanted or c.shape in wanted or c.key in wanted]
    if not cases:
        ap.error(f"--only {a.only}: no such row (shapes: {sorted({c.shape for c in CASES})})")
    reference = json.loads(a.reference.read_text()) if a.reference.exists() else {"rows": {}}
    work = a.work or Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    source = f"kai-oracle {a.kai_oracle}, this run" if a.kai_oracle else a.reference.name
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; shoal: process time, median of {a.repeat}; "
          f"KAI: action-only time from {source}")
    print(HEAD)
    print("-" * len(HEAD))
    rows = []
    for case in cases:
        data = scenario(case)
        if a.kai_oracle:
            kai = run_kai(a.kai_oracle, case, data, work, a.kai_repeat)
            if a.record:
                record(a.record, case.key, {k: v for k, v in kai.items() if k != "expected"})
            ours = run_shoal(data, a.repeat, kai["expected"])
        else:
            kai = reference.get("rows", {}).get(case.key)
            ours = run_shoal(data, a.repeat, None)
        rows.append(compare(case, ours, kai))
        print(rows[-1].text())
        for p in (ours.problems or [])[:3]:
            print(f"    {p}")
        sys.stdout.flush()
    print(LEGEND)
    if a.markdown:
        print("\n".join(["", MD_HEAD, *(r.markdown() for r in rows)]))
    flagged = sum(any(f != "no KAI figure" and not f.startswith("KAI artefact") for f in r.flags) for r in rows)
    if flagged:
        print(f"{flagged} row(s) differ from KAI", file=sys.stderr)
    return 1 if flagged else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
