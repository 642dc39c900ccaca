"""`shoal podgroup` end to end: the KAI example, owner chains, --pod, and one-line errors with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from workload_fixtures import DATA

from shoal.cli.main import main

REPO = Path(__file__).resolve().parents[2]
KAI_EXAMPLES = REPO / "data" / "kai-examples"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["podgroup", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_kai_pytorch_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(KAI_EXAMPLES / "batch--pytorch-job.yaml"))
    assert (code, err) == (0, "")
    [pg] = list(yaml.safe_load_all(out))
    assert pg["apiVersion"] == "scheduling.run.ai/v2alpha2" and pg["kind"] == "PodGroup"
    assert pg["metadata"]["name"] == "pg-pytorch-dist-mnist-nccl"
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "default-queue"
    assert pg["spec"]["subGroups"] == [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 2}]


def test_multi_document_output_and_queue_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(DATA / "jobset-inorder.yaml"), "--queue-default", "batch-q")
    docs = list(yaml.safe_load_all(out))
    assert code == 0 and [d["spec"]["minMember"] for d in docs] == [1, 8]
    assert {d["spec"]["queue"] for d in docs} == {"batch-q"}


def test_owner_chain_and_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "llm-pretrain-worker-5", "namespace": "team-b", "labels": {
            "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "5"}}}))
    code, out, _ = run(capsys, str(DATA / "pytorch-segments.yaml"), "--pod", str(pod))
    assert code == 0
    assert out.rstrip().endswith("subgroup worker-1")
    code, out, _ = run(capsys, str(DATA / "deployment-chain.yaml"))
    assert code == 0 and yaml.safe_load(out)["spec"]["priorityClassName"] == "inference"


@pytest.mark.parametrize(("content", "message"), [
    pytest.param(None, "cannot read", id="missing file"),
    pytest.param("kind: [\n", "invalid YAML", id="broken YAML"),
    pytest.param("", "no YAML document", id="empty file"),
    pytest.param("- a\n- b\n", "document 1 is not a Kubernetes object", id="a list, not an object"),
    pytest.param("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: bert, namespace: team-a}\n"
                 "spec: {pytorchReplicaSpecs: {Worker: {replicas: 0}}}\n",
                 "PyTorchJob team-a/bert: spec.pytorchReplicaSpecs.Worker.replicas: must be > 0, got 0",
                 id="a malformed workload"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          content: str | None, message: str) -> None:
    path = tmp_path / "owner.yaml"
    if content is not None:
        path.write_text(content)
    code, out, err = run(capsys, str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and str(path) in err
    assert "Traceback" not in err
