"""The live config from a ConfigMap: what is applied, what is refused, and what keeps the running config."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.framework.config import SchedulerConfig
from shoal.kube.config_watch import ConfigMapSource, parse_configmap_ref

SPREAD = """\
actions: "allocate, reclaim"
tiers:
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeplacement
    arguments: {gpu: spread, cpu: spread}
"""


def _cm(text: str | None, rv: str = "1") -> dict[str, Any]:
    data = {} if text is None else {"config.yaml": text}
    return {"metadata": {"name": "shoal-config", "namespace": "shoal-system", "resourceVersion": rv}, "data": data}


@pytest.fixture
def source() -> tuple[ConfigMapSource, list[SchedulerConfig]]:
    seen: list[SchedulerConfig] = []
    client: Any = None  # the informer is never run in these tests: events are fed directly
    return ConfigMapSource(client, "shoal-system", "shoal-config", seen.append), seen


def test_a_valid_config_is_applied_once(source: tuple[ConfigMapSource, list[SchedulerConfig]]) -> None:
    src, seen = source
    src.informer.apply({"type": "ADDED", "object": _cm(SPREAD)})
    src.informer.apply({"type": "MODIFIED", "object": _cm(SPREAD, rv="2")})  # same text: labels changed, say
    assert len(seen) == 1
    assert seen[0].actions == ("allocate", "reclaim")
    plugin = seen[0].plugin("nodeplacement")
    assert plugin is not None and plugin.arguments == {"gpu": "spread", "cpu": "spread"}


@pytest.mark.parametrize(("text", "why"), [
    pytest.param("tiers:\n- plugins:\n  - name: nosuch\n", "unknown plugin", id="unknown plugin"),
    pytest.param("actions: allocate, dance\n", "unknown action", id="unknown action"),
    pytest.param("actions: [\n", "not YAML", id="broken YAML"),
    pytest.param("- a list\n", "mapping", id="not a mapping"),
])
def test_a_bad_config_is_refused_and_the_old_one_stays(source: tuple[ConfigMapSource, list[SchedulerConfig]],
                                                        caplog: pytest.LogCaptureFixture, text: str,
                                                        why: str) -> None:
    src, seen = source
    src.informer.apply({"type": "ADDED", "object": _cm(SPREAD)})
    src.informer.apply({"type": "MODIFIED", "object": _cm(text, rv="2")})
    assert len(seen) == 1 and src.rejected == 1
    assert why in caplog.text
    # Fixing the text applies it.
    src.informer.apply({"type": "MODIFIED", "object": _cm(SPREAD.replace("spread", "binpack"), rv="3")})
    assert len(seen) == 2


def test_deletion_or_a_missing_key_keeps_the_running_config(
        source: tuple[ConfigMapSource, list[SchedulerConfig]]) -> None:
    src, seen = source
    src.informer.apply({"type": "ADDED", "object": _cm(SPREAD)})
    src.informer.apply({"type": "MODIFIED", "object": _cm(None, rv="2")})
    src.informer.apply({"type": "DELETED", "object": _cm(None, rv="3")})
    assert len(seen) == 1


@pytest.mark.parametrize(("ref", "want"), [
    pytest.param("cfg", ("shoal-system", "cfg"), id="name only: the default namespace"),
    pytest.param("ops/cfg", ("ops", "cfg"), id="namespace and name"),
])
def test_parse_configmap_ref(ref: str, want: tuple[str, str]) -> None:
    assert parse_configmap_ref(ref, "shoal-system") == want


def test_parse_configmap_ref_rejects_empty_name() -> None:
    with pytest.raises(ValueError, match="not a ConfigMap reference"):
        parse_configmap_ref("ops/", "shoal-system")
