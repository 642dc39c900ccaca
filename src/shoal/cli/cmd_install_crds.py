"""`shoal install-crds`: apply KAI's CRDs (Queue, PodGroup, Topology) and the priority classes."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import shoal


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("install-crds", help="apply the Queue/PodGroup/Topology CRDs and priority classes")
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG)")
    p.add_argument("--deploy-dir", metavar="DIR", help="directory holding crds/ and priorityclasses.yaml")
    p.add_argument("--rbac", action="store_true", help="also apply rbac.yaml (ServiceAccount, ClusterRole)")
    p.set_defaults(func=run)


def deploy_dir(explicit: str | None = None) -> Path | None:
    """The manifests: --deploy-dir, else package data `shoal/deploy`, else `deploy/` of the checkout."""
    here = Path(shoal.__file__).resolve().parent
    for cand in (Path(explicit) if explicit else None, here / "deploy", here.parents[1] / "deploy"):
        if cand is not None and (cand / "crds").is_dir():
            return cand
    return None


def run(args: argparse.Namespace) -> int:
    from shoal.kube.install import apply_manifests

    root = deploy_dir(args.deploy_dir)
    if root is None:
        print("shoal install-crds: cannot find the deploy/ manifests; pass --deploy-dir")
        return 2
    files = [*sorted((root / "crds").glob("*.yaml")), root / "priorityclasses.yaml"]
    if args.rbac:
        files.append(root / "rbac.yaml")
    for line in asyncio.run(apply_manifests(args.kubeconfig, files)):
        print(line)
    return 0
