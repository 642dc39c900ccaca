"""Fixtures for end-to-end tests against a real kube-apiserver (scripts/k8s-test-env).

* ``cluster`` (session): starts etcd + kube-apiserver + kube-controller-manager + kwok into a temp dir,
  applies ``deploy/`` (CRDs, priority classes, RBAC) and yields a :class:`Cluster`; stops it at the end.
  Without the binaries the tests are skipped, except under ``CI`` where that is a failure.
* ``kenv`` (function): a fresh namespace plus a helper to create kwok-managed fake GPU nodes; both are
  deleted afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from .cluster import SCRIPT, Cluster, KEnv, apply_deploy, require_binaries

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/e2e is an e2e test, even if its module forgets ``pytestmark``."""
    for item in items:
        if _HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_binaries()
    state = tmp_path_factory.mktemp("k8s")
    # A 10 s heartbeat keeps the heartbeat test short and costs little with a few dozen nodes.
    # The PV controller binds claims to the volumes shoal pre-binds (tests/e2e/test_volumes_live.py).
    # The resource-claim controller makes pods' claims from their templates and releases them (test_dra_live.py).
    env = {"SHOAL_KWOK_HEARTBEAT_MS": "10000",
           "SHOAL_KCM_CONTROLLERS": "persistentvolume-binder-controller,resourceclaim-controller",
           **os.environ}
    res = subprocess.run([str(SCRIPT), "start", str(state)], capture_output=True, text=True, timeout=240,
                         env=env)
    if res.returncode != 0:
        pytest.fail(f"k8s-test-env start failed:\n{res.stderr[-4000:]}", pytrace=False)
    try:
        c = Cluster(state, state / "admin.kubeconfig", state / "scheduler.kubeconfig")
        apply_deploy(c.client())
        yield c
    finally:
        subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True, text=True, timeout=60)


@pytest.fixture
def kenv(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[KEnv]:
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30].strip("-")
    suffix = uuid.uuid4().hex[:6]
    ns = f"e2e-{slug}-{suffix}"
    client = cluster.client()
    client.create(Namespace(metadata=ObjectMeta(name=ns, labels={"shoal.dev/e2e": "true"})))
    env = KEnv(cluster=cluster, client=client, namespace=ns, node_prefix=f"kwok-{slug[:20]}-{suffix}")
    try:
        yield env
    finally:
        env.cleanup()
