"""openb loaders: the real trace files load with the documented totals; bad rows name file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.sim.datafiles import PACKAGE_TRACES
from shoal.sim.loaders.openb import (
    NODE_FILE,
    OPENB_DIR,
    OpenbFormatError,
    load_nodes,
    load_pods,
    pod_file,
)

TRACES = PACKAGE_TRACES  # the traces shipped with shoal (not $SHOAL_TRACES): what users get

POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"


def test_gpu_node_list_totals() -> None:
    nodes = load_nodes(TRACES / OPENB_DIR / NODE_FILE)
    assert len(nodes) == 1213
    assert sum(n.gpu for n in nodes) == 6212
    assert sum(n.cpu_milli for n in nodes) == 107_018_000


@pytest.mark.parametrize(
    ("workload", "pods", "gpu_milli_total"),
    [
        pytest.param("default", 8152, 6_086_800, id="default: 8152 pods, 6086.8 GPUs"),
        pytest.param("multigpu50", 9061, None, id="5-column multigpu list loads without gpu_spec"),
        pytest.param("gpuspec33", 8152, 6_086_800, id="gpuspec list keeps the GPU request of default"),
    ],
)
def test_pod_lists_load(workload: str, pods: int, gpu_milli_total: int | None) -> None:
    loaded = load_pods(pod_file(TRACES, workload))
    assert len(loaded) == pods
    if gpu_milli_total is not None:
        assert sum(p.gpu_request_milli for p in loaded) == gpu_milli_total


def test_gpuspec_constraints_are_parsed() -> None:
    pods = load_pods(pod_file(TRACES, "gpuspec33"))
    specs = {p.gpu_spec for p in pods}
    assert ("V100M16", "V100M32") in specs
    assert () in specs


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        pytest.param("p1,abc,1,0,0,\n", 2, "not an integer", id="non-integer CPU"),
        pytest.param("p1,1000,1,0,0,\np2,-5,1,0,0,\n", 3, "outside", id="negative CPU on line 3"),
        pytest.param("p1,1000,1,9,1000,\n", 2, "num_gpu", id="more than 8 GPUs"),
        pytest.param("p1,1000,1,1,1200,\n", 2, "gpu_milli", id="more than a whole GPU"),
        pytest.param("p1,1000,1,2,500,\n", 2, "whole GPUs", id="fractional multi-GPU pod"),
        pytest.param("p1,1000,1,1,0,\n", 2, "num_gpu=1 but gpu_milli=0", id="GPU count without milli"),
        pytest.param("p1,1000,1,1,500,H100\n", 2, "unknown GPU model", id="unknown model in gpu_spec"),
        pytest.param("p1,1000,1,0,0,\np1,1000,1,0,0,\n", 3, "duplicated", id="duplicate pod name"),
        pytest.param("p1,1000,1,0,0,,extra\n", 2, "more fields", id="extra field"),
        pytest.param("p1,1000,,0,0,\n", 2, "empty", id="empty memory"),
    ],
)
def test_bad_pod_rows_name_file_and_line(tmp_path: Path, body: str, line: int, message: str) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(POD_HEADER + body)
    with pytest.raises(OpenbFormatError, match=message) as err:
        load_pods(path)
    assert f"{path}:{line}:" in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(NODE_HEADER + "n1,96000,1024,8,Z9\n", "pods.csv:2: unknown GPU model", id="unknown node model"),
        pytest.param("sn,cpu_milli,gpu,model\nn1,1,1,T4\n", "pods.csv:1: missing column", id="missing column"),
        pytest.param(NODE_HEADER + "n1,96000,1024,16,G2\n", "pods.csv:2: column 'gpu'", id="16 GPUs on a node"),
    ],
)
def test_bad_node_rows(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(text)
    with pytest.raises(OpenbFormatError, match=message):
        load_nodes(path)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(OpenbFormatError, match="no such trace file"):
        load_pods(tmp_path / "absent.csv")
