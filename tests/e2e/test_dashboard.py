"""The dashboard in headless Chromium against the e2e cluster: queues, a pending gang's reason, the
node x GPU grid, a live update without reloading, and a screenshot kept as a test artifact
(`reports/test-artifacts/dashboard*.png`, or `$SHOAL_TEST_ARTIFACTS`)."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod

from .browser import Browser, browser_path
from .cluster import REPO, Cluster, KEnv, _in_ci, eventually
from .scheduler_fixtures import shoal_runner  # noqa: F401
from .test_visibility import _bound, add_blocked_gangs, build_three_causes, free_port

ARTIFACTS = Path(os.environ.get("SHOAL_TEST_ARTIFACTS") or REPO / "reports" / "test-artifacts")


@pytest.fixture
def browser(tmp_path: Path) -> Any:
    binary = browser_path()
    if binary is None:
        msg = "chromium not installed (scripts/browser install)"
        if _in_ci():
            pytest.fail(f"{msg}; CI must not skip the dashboard test", pytrace=False)
        pytest.skip(msg)
    b = Browser(binary, tmp_path / "profile", tmp_path / "chromium.log").start()
    try:
        yield b
    finally:
        b.close()


def test_dashboard_shows_queues_reasons_and_updates(kenv: KEnv, cluster: Cluster, shoal_runner: Any,
                                                    browser: Browser) -> None:
    sfx = kenv.node_prefix.rsplit("-", 1)[-1]
    scheduler = f"ui-{sfx}"
    q = build_three_causes(kenv, scheduler, sfx)
    port = free_port()
    proc = shoal_runner(scheduler, "--no-leader-elect", "--eta-period", "1s", "--ui-port", str(port))
    # The running pods first: otherwise the over-limit gang (4 GPUs of the same 8-GPU-limited queue) can be
    # bound before the trainer and leave the trainer pending instead (a race the test must not depend on).
    eventually(lambda: _bound(kenv, 7), 60, what="the seven running pods bound")
    add_blocked_gangs(kenv, scheduler, sfx, q)
    url = f"http://127.0.0.1:{port}/"
    eventually(lambda: _get(url + "healthz") == 200, 60, what="the dashboard to listen")
    assert f"dashboard on http://127.0.0.1:{port}/" in eventually(lambda: proc.tail(20000) or None, 5)
    req = urllib.request.Request(url + "api/report", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 405  # read-only

    page = browser.page()
    page.goto(url)
    need = (q["dept"], q["lim"], q["free"], f"queue {q['lim']} is at its limit of 8 GPUs", "fragmentation",
            f"must run in one {q['rack']} domain")
    try:
        eventually(lambda: all(s in page.text() for s in need) or None, 60, interval=0.5,
                   what="queues and reasons on the page")
    except AssertionError:
        page.screenshot(ARTIFACTS / "dashboard-failed.png")
        pytest.fail(f"page text:\n{page.text()[:3000]}\nscheduler log:\n{proc.tail()}")
    ours = page.js(f"[...document.querySelectorAll('.node')].filter(n => n.dataset.node.startsWith("
                   f"'{kenv.node_prefix}')).length")
    assert ours == 10
    filled = (f"[...document.querySelectorAll('.node[data-node^=\"{kenv.node_prefix}\"] .cell .fill')].length")
    per_node = (f"[...document.querySelectorAll('.node[data-node^=\"{kenv.node_prefix}\"]')].map(n => "
                "n.dataset.node + ':' + n.querySelectorAll('.cell .fill').length).join(' ')")
    # Every GPU held by this test's pods is a filled cell: trainer 8, fillers 4 x 6, rack fillers 2 x 8.
    try:
        eventually(lambda: page.js(filled) == 8 + 4 * 6 + 2 * 8 or None, 20, interval=0.5, what="48 filled cells")
    except AssertionError:
        pytest.fail(f"GPU cells per node: {page.js(per_node)}")
    # The trainer's declared 10 minutes: its ETA comes from the ETA loop (every second here) and
    # reaches the page at the next poll, which can trail the cells on a loaded machine.
    try:
        eventually(lambda: ("in 9m" in page.text() or "in 10m" in page.text()) or None, 30, interval=0.5,
                   what="the trainer's ETA on the page")
    except AssertionError:
        pytest.fail(f"page text:\n{page.text()[:3000]}\nscheduler log:\n{proc.tail()}")
    first = page.screenshot(ARTIFACTS / "dashboard.png")
    assert first.stat().st_size > 10_000

    # A change in the cluster shows up without reloading: the trainer leaves, the gang behind the limit runs.
    cycle = int(page.js("document.body.dataset.cycle"))
    kenv.client.delete(Pod, "trainer-0", namespace=kenv.namespace, grace_period=0)
    gang = f"{kenv.namespace}/over-limit"
    eventually(lambda: page.js(f"document.querySelector('[data-gang=\"{gang}\"]') === null") or None, 60,
               interval=0.5, what="the over-limit gang to leave the pending table")
    assert int(page.js("document.body.dataset.cycle")) > cycle
    assert f"queue {q['lim']} is at its limit" not in page.text()
    page.screenshot(ARTIFACTS / "dashboard-after.png")


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except (urllib.error.URLError, OSError):
        return 0
