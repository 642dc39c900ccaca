"""The whole public KAI scenario corpus through `shoal.conformance`, against the known-failures list."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shoal.conformance.runner import collect, load, run

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "conformance" / "kai"  # carried by the repository (THIRD_PARTY.md)
KNOWN = yaml.safe_load((Path(__file__).parent / "known_failures.yaml").read_text()) or {}
FILES = collect([str(CORPUS)])


def test_corpus_is_present() -> None:
    assert len(FILES) == 242, f"expected the 242 public scenarios under {CORPUS}, found {len(FILES)}"


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_scenario(path: Path) -> None:
    sc = load(path)
    result = run(sc)
    if result.outcome == "skipped":
        assert "not implemented yet" in result.message, result.message
        assert sc.id not in KNOWN, f"{sc.id} is skipped ({result.message}); drop it from known_failures.yaml"
        return
    if sc.id in KNOWN:
        assert result.outcome != "passed", f"{sc.id} passes now: remove it from known_failures.yaml"
        return
    assert result.outcome == "passed", f"{result.outcome}: {result.message}"


def test_known_failures_name_real_scenarios() -> None:
    ids = {f.stem for f in FILES}
    unknown = sorted(set(KNOWN) - ids)
    assert not unknown, f"known_failures.yaml names unknown scenarios: {unknown}"
    assert all(isinstance(v, str) and v.strip() for v in KNOWN.values()), "every entry needs a reason"


def test_kai_builder_bias_counts_a_fraction_job_once_per_node() -> None:
    """KAI's test builder puts one pod per node into a GPU-fraction job's `Allocated`; the
    scenario carries the difference from the per-pod sum (core units), and a whole-GPU job none."""
    from shoal.conformance.loader import kai_builder_bias
    from shoal.model import GpuRequest, Pod, PodStatus

    def pod(i: int, node: str | None, status: PodStatus) -> Pod:
        return Pod(f"p{i}", f"p{i}", "", "j", status, cpu_milli=1000, memory=10**9,
                   gpu=GpuRequest(portion_milli=500), node=node)

    pods = [pod(0, "a", PodStatus.RUNNING), pod(1, "a", PodStatus.RUNNING), pod(2, "a", PodStatus.RUNNING),
            pod(3, "b", PodStatus.RUNNING), pod(4, None, PodStatus.PENDING)]
    # Builder: one pod on a, one on b = 1 GPU, 2 CPU, 2 GB; pods: four running = 2 GPUs, 4 CPU, 4 GB.
    assert kai_builder_bias(pods) == (-1000.0, -2000.0, -2e9)
