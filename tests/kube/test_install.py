"""`shoal install-crds [--rbac]` knows every kind of the manifests it applies."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.kube.client import load_yaml_documents
from shoal.kube.install import KINDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
FILES = [*sorted((DEPLOY / "crds").glob("*.yaml")), DEPLOY / "priorityclasses.yaml", DEPLOY / "rbac.yaml"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_document_is_a_kind_install_applies(path: Path) -> None:
    docs = load_yaml_documents(path.read_text())
    assert docs
    unknown = {(d["apiVersion"], d["kind"]) for d in docs} - set(KINDS)
    assert not unknown, f"{path.name}: install-crds cannot apply {sorted(unknown)}"
