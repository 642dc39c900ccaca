"""Data files: the shipped traces are complete and intact, loaders read plain and ``.gz`` alike, and a
missing file is a one-line error naming it (never a traceback)."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from shoal.cli.main import main
from shoal.experiments.fgd.workload import WORKLOADS
from shoal.sim.datafiles import PACKAGE_TRACES, DataFileMissing, locate, open_text
from shoal.sim.loaders.openb import NODE_FILE, OPENB_DIR, OpenbFormatError, load_pods, pod_file
from shoal.sim.loaders.traces import TraceOptions, load_philly
from shoal.sim.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
POD_ROWS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,1000,1,1,500,\np2,2000,1,0,0,\n"


def test_every_trace_a_command_reads_by_default_is_shipped() -> None:
    needed = [PACKAGE_TRACES / OPENB_DIR / NODE_FILE, *(pod_file(PACKAGE_TRACES, w) for w in WORKLOADS),
              PACKAGE_TRACES / "results" / "fgd-atc23" / "analysis_allo_discrete.csv",
              PACKAGE_TRACES / "philly-pollux" / "philly.csv"]
    assert [p for p in needed if locate(p) is None] == []


def test_shipped_traces_decompress_to_the_upstream_bytes() -> None:
    manifest = (PACKAGE_TRACES / "MANIFEST.sha256").read_text().splitlines()
    shipped = sorted(p.relative_to(PACKAGE_TRACES).as_posix() for p in PACKAGE_TRACES.rglob("*.gz"))
    assert sorted(line.split("  ./")[1] + ".gz" for line in manifest) == shipped
    for line in manifest:
        digest, name = line.split("  ./")
        data = gzip.decompress((PACKAGE_TRACES / f"{name}.gz").read_bytes())
        assert hashlib.sha256(data).hexdigest() == digest, name


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_loaders_read_plain_and_gzip(tmp_path: Path, compressed: bool) -> None:
    path = tmp_path / "pods.csv"
    if compressed:
        (tmp_path / "pods.csv.gz").write_bytes(gzip.compress(POD_ROWS.encode()))
    else:
        path.write_text(POD_ROWS)
    assert [p.name for p in load_pods(path)] == ["p1", "p2"]  # the plain name finds either
    with open_text(locate(path) or path) as fh:
        assert fh.read() == POD_ROWS


def test_a_malformed_gzip_row_names_the_gz_file_and_line(tmp_path: Path) -> None:
    gz = tmp_path / "pods.csv.gz"
    gz.write_bytes(gzip.compress((POD_ROWS + "p3,abc,1,0,0,\n").encode()))
    with pytest.raises(OpenbFormatError, match=rf"{gz}:4: column 'cpu_milli' is not an integer"):
        load_pods(tmp_path / "pods.csv")


def test_a_missing_file_is_one_line_naming_both_names(tmp_path: Path) -> None:
    with pytest.raises(DataFileMissing) as err:
        open_text(tmp_path / "gone.csv", "trace")
    msg = str(err.value)
    assert "\n" not in msg and f"{tmp_path / 'gone.csv'} (nor gone.csv.gz): no such trace file" in msg
    with pytest.raises(OpenbFormatError, match="no such trace file"):
        load_pods(tmp_path / "gone.csv")


def test_the_philly_examples_read_the_shipped_trace() -> None:
    jobs = load_philly(PACKAGE_TRACES / "philly-pollux" / "philly.csv", TraceOptions(vcs=["6214e9"]))
    assert len(jobs) == 41_226  # the VC with the most jobs (every one of its rows)
    scenario = load_scenario(REPO / "examples" / "sim" / "philly-4days.yaml")
    assert scenario.jobs


def test_fgd_with_a_wrong_traces_dir_is_one_line_and_exit_2(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fgd", "--seeds", "42", "--traces", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert str(tmp_path / OPENB_DIR / NODE_FILE) in err and "--traces" in err


def test_fgd_with_a_malformed_trace_is_one_line_and_exit_2(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    openb = tmp_path / OPENB_DIR
    openb.mkdir()
    (openb / NODE_FILE).write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1,9,T4\n")
    (openb / "openb_pod_list_default.csv").write_text(POD_ROWS)
    code = main(["fgd", "--seeds", "42", "--jobs", "1", "--traces", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and f"{openb / NODE_FILE}:2: column 'gpu'" in err
