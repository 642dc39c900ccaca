"""`shoal podgroup`: print the PodGroup(s) KAI's pod grouper would create for a workload file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from shoal.workloads import WorkloadError, derive_podgroups, pod_assignment

HELP = """\
Derive the PodGroup(s) for a workload, offline, and print them as YAML (one document each).

OWNER.yaml holds one object (the top owner: a PyTorchJob, RayCluster, JobSet, Deployment, ...) or
several documents forming an owner chain: the LAST document is the top owner and the earlier ones are
the owners below it, direct owner of the pod first (e.g. Job then CronJob; ReplicaSet then Deployment;
JobSet then TrainJob). Without --pod the owner's pod template stands in for the pod, and every
PodGroup the workload implies is printed. With --pod, the pod's PodGroup is printed, followed by a
comment naming the PodGroup and subgroup the pod joins. Exit code 2 on bad input.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "podgroup", help="derive the PodGroup(s) for a workload file",
        description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("owner", metavar="OWNER.yaml", help="workload object(s); last document = top owner")
    parser.add_argument("--pod", metavar="POD.yaml", help="the pod being grouped (default: the template)")
    parser.add_argument("--queue-default", metavar="NAME", default="default-queue",
                        help="queue when neither labels nor project name one (default: %(default)s)")
    parser.set_defaults(func=run)


class InputError(Exception):
    """Bad input file; the message is the one line printed on stderr."""


def _load(path: str) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}{where}: invalid YAML: {getattr(err, 'problem', None) or err}") from None
    if not docs:
        raise InputError(f"{path}: no YAML document found")
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            kind = type(doc).__name__
            raise InputError(f"{path}: document {i + 1} is not a Kubernetes object (got {kind})")
    return docs


def run(args: argparse.Namespace) -> int:
    try:
        chain = _load(args.owner)
        pod = None
        if args.pod:
            pods = _load(args.pod)
            if len(pods) != 1:
                raise InputError(f"{args.pod}: expected one Pod document, found {len(pods)}")
            pod = pods[0]
        specs = derive_podgroups(chain, pod, default_queue=args.queue_default)
        assignment = pod_assignment(pod, specs) if pod is not None else None
    except InputError as err:
        print(f"shoal podgroup: {err}", file=sys.stderr)
        return 2
    except WorkloadError as err:
        source = args.pod if args.pod and err.kind == "Pod" else args.owner
        print(f"shoal podgroup: {source}: {err}", file=sys.stderr)
        return 2
    out = yaml.safe_dump_all([s.to_manifest() for s in specs], sort_keys=False, explicit_start=True)
    sys.stdout.write(out)
    if assignment is not None:
        group, sub = assignment
        sys.stdout.write(f"# pod joins PodGroup {group}" + (f", subgroup {sub}\n" if sub else "\n"))
    return 0
