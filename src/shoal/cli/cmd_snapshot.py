"""`shoal snapshot`: the live cluster as a file that `shoal cycle` and `shoal simulate` replay."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from shoal.cli.live import LiveError, add_cluster_args, fetch_report, main_wrapper, run_live

HELP = """\
Export the live cluster (nodes, queues, topologies, priority classes, PodGroups and pods, trimmed
to what the scheduler reads: no images, commands, env or volumes) with the running scheduler's
config. The file is both a cluster file for `shoal cycle FILE` (which decides what the live
scheduler decides on the same state) and a scenario for `shoal simulate FILE` (running jobs
arrive at their start time, pending ones at their creation; run times from each PodGroup's
shoal.dev/expected-runtime, else the Queue's shoal.dev/default-runtime, else --default-runtime).
--anonymise replaces every name and drops labels and annotations the scheduler does not read.
Needs only read access (deploy/rbac-viewer.yaml).
"""


def register(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="export the live cluster for `shoal cycle` and `shoal simulate`",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", metavar="FILE", default="-",
                   help="where to write (default: stdout); `-o yaml` / `-o json` print that format")
    p.add_argument("--json", action="store_true", help="write JSON instead of YAML")
    p.add_argument("--anonymise", "--anonymize", action="store_true", help="replace names, drop free text")
    p.add_argument("--pod-grouper", action=argparse.BooleanOptionalAction, default=True,
                   help="the scheduler runs its pod grouper (pods without a PodGroup wait for one; default: on)")
    p.add_argument("--default-runtime", default="1h", metavar="DURATION",
                   help="run time of jobs that declare none, for the scenario (default: %(default)s)")
    add_cluster_args(p, output=False)
    p.set_defaults(func=main_wrapper("snapshot", main))


def main(args: argparse.Namespace) -> int:
    from shoal.kai.units import parse_duration
    from shoal.kube.export import list_objects

    try:
        default_runtime = parse_duration(args.default_runtime)
    except ValueError as e:
        raise LiveError(f"--default-runtime: {e}") from None

    async def body(client: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        objects = await list_objects(client)
        try:
            report = await fetch_report(client, args)
        except LiveError as e:
            print(f"shoal snapshot: warning: {e}; the file carries the default config", file=sys.stderr)
            report = None
        return objects, report

    objects, report = run_live("snapshot", args, body)
    doc = build_document(objects, args.scheduler_name, (report or {}).get("config") or {}, args.pod_grouper,
                         args.anonymise, default_runtime, time.time())
    fmt = "json" if args.json or args.output == "json" else "yaml"
    text = json.dumps(doc, indent=1) + "\n" if fmt == "json" else yaml.safe_dump(doc, sort_keys=False)
    if args.output in ("-", "json", "yaml"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}: {len(objects['nodes'])} nodes, {len(objects['queues'])} queues, "
              f"{len(objects['podGroups'])} PodGroups, {len(objects['pods'])} pods", file=sys.stderr)
    return 0


def build_document(objects: dict[str, Any], scheduler: str, config: dict[str, Any], pod_grouper: bool,
                   anonymised: bool, default_runtime: float, now: float) -> dict[str, Any]:
    """The snapshot file (shoal.kube.export) with its scenario section."""
    from shoal.kube.anonymise import anonymise
    from shoal.kube.export import snapshot_document, snapshot_from_objects
    from shoal.kube.export_scenario import scenario_from_snapshot
    from shoal.visibility.runtimes import RuntimeEstimator, runtime_facts

    if anonymised:
        objects = anonymise(objects)
    snap = snapshot_from_objects(objects, scheduler, now, pod_grouper=pod_grouper)
    estimator = RuntimeEstimator(default_runtime)
    facts = runtime_facts(objects)
    estimator.queue_defaults = facts.queue_defaults

    def remaining(uid: str, elapsed: float) -> float:
        return estimator.estimate(facts.job(uid), elapsed)[0]

    scenario = scenario_from_snapshot(snap, objects["queues"], config, remaining,
                                      name="snapshot" if anonymised else f"snapshot-{scheduler}")
    return snapshot_document(objects, scheduler_name=scheduler, config=config, pod_grouper=pod_grouper,
                             anonymised=anonymised, scenario=scenario, now=now)
