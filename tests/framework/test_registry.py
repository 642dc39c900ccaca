"""The plugin/action registry: opt-in actions run where a config names them; unknown names fail
when a session opens, with the name in the message; per-cycle state is typed and per session."""

from __future__ import annotations

import pytest

from shoal.cycle import check_config, open_session, run_cycle
from shoal.defaults import builtins
from shoal.framework.config import DEFAULT_ACTIONS, ConfigError, SchedulerConfig, config_from_dict
from shoal.framework.cycle_state import CycleState, StateKey
from shoal.framework.registry import Registry
from shoal.framework.session import Session
from shoal.model import ClusterSnapshot


def test_a_config_may_name_an_action_outside_the_default_list() -> None:
    config = config_from_dict({"actions": "allocate, audit"})
    assert config.actions == ("allocate", "audit")


def test_an_opt_in_action_runs_when_the_registry_has_it() -> None:
    seen: list[float] = []

    def audit(ssn: Session) -> None:
        seen.append(ssn.now)

    base = builtins()
    registry = Registry(base.plugins, {**base.actions, "audit": audit})
    result = run_cycle(ClusterSnapshot(now=5.0), SchedulerConfig(actions=("allocate", "audit")), registry)
    assert result.actions_run == ["allocate", "audit"] and seen == [5.0]
    assert "audit" not in DEFAULT_ACTIONS


@pytest.mark.parametrize(("config", "needle"), [
    pytest.param(SchedulerConfig(actions=("allocate", "teleport")), "unknown action(s) teleport", id="action"),
    pytest.param(config_from_dict({"tiers": [{"plugins": [{"name": "nosuch"}]}]}), "unknown plugin 'nosuch'",
                 id="plugin"),
])
def test_unknown_names_fail_when_a_session_opens(config: SchedulerConfig, needle: str) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        open_session(ClusterSnapshot(now=0.0), config)
    assert needle in str(err.value)
    with pytest.raises(ConfigError, match=r"^my\.yaml: "):
        check_config(config, "my.yaml")


def test_cycle_state_is_typed_and_per_key() -> None:
    counts: StateKey[dict[str, int]] = StateKey("counts")
    other: StateKey[dict[str, int]] = StateKey("counts")  # same name, another owner
    state = CycleState()
    state.setdefault(counts, dict)["a"] = 1
    assert state.get(counts) == {"a": 1} and state.get(other) is None
    state.set(other, {"b": 2})
    assert state.get(counts) == {"a": 1}
    state.clear()
    assert state.get(counts) is None


def test_each_session_starts_with_empty_state() -> None:
    key: StateKey[int] = StateKey("n")
    first = open_session(ClusterSnapshot(now=0.0), SchedulerConfig())
    first.state.set(key, 1)
    assert open_session(ClusterSnapshot(now=0.0), SchedulerConfig()).state.get(key) is None
