"""`shoal simulate` on bad input: one line naming file and line/field, exit code 2, no traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shoal.cli.main import main

DATA = Path(__file__).parent / "data"


def _scenario(tmp_path: Path, old: str, new: str, jobs: str | None = None) -> Path:
    text = (DATA / "small.yaml").read_text()
    assert old in text
    (tmp_path / "small-jobs.csv").write_text(
        jobs if jobs is not None else (DATA / "small-jobs.csv").read_text()
    )
    p = tmp_path / "s.yaml"
    p.write_text(text.replace(old, new))
    return p


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            lambda t: [str(t / "missing.yaml")],
            r"missing\.yaml: no such scenario file",
            id="scenario file missing",
        ),
        pytest.param(
            lambda t: [str(_scenario(t, "cycle_interval: 10s", "cycle_interval: [1"))],
            r"s\.yaml:\d+: invalid YAML",
            id="YAML syntax error",
        ),
        pytest.param(
            lambda t: [
                str(
                    _scenario(
                        t,
                        "name: small",
                        "name: small",
                        jobs="name,arrival,duration,queue,gpus\nj1,0,60,alpha,1\nj2,0,oops,alpha,1\n",
                    )
                )
            ],
            r"small-jobs\.csv:3: duration: expected a number of seconds or a duration like 1h30m, got .oops.",
            id="bad job row names file and line",
        ),
        pytest.param(
            lambda t: [str(_scenario(t, "gpus: 4, gpu_model", "gpus: four, gpu_model"))],
            r"s\.yaml:\d+: gpus: expected a number",
            id="bad node field",
        ),
        pytest.param(
            lambda t: ["--config", str(t / "nope.yaml")],
            r"nope\.yaml: no such file",
            id="config file missing",
        ),
        pytest.param(
            lambda t: ["compare"], r"needs at least one scheduler config", id="compare without configs"
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: object, expected: str
) -> None:
    argv = args(tmp_path)  # type: ignore[operator]
    assert main(["simulate", *argv, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("error: ")

    assert re.search(expected, err), err


def test_seed_and_config_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ex = Path(__file__).parents[2] / "examples" / "sim" / "allocate-only.yaml"
    out = tmp_path / "r"
    rc = main(
        [
            "simulate",
            str(DATA / "small.yaml"),
            "--config",
            str(ex),
            "--seed",
            "9",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "config allocate-only" in text and "seed 9" in text
    assert (out / "index.html").is_file()
