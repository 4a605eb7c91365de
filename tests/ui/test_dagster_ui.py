"""A real browser opens the Dagster UI of our code location: the asset catalog lists our assets, the asset page
lists the registered dataset partitions, and a variant is a partition with its own history and staleness. Screenshots go to test-artifacts/ (git-ignored)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium binary (CI installs Debian's chromium: apt-get install chromium)"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts"
ASSETS = ("skb", "planner", "reranker", "eval_metrics")
DATASETS = ["hpo", "synth-prime"]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """The webserver and its code-server child share a process group: SIGTERM it, then SIGKILL what is left
    (Dagster's processes can ignore SIGTERM for a long time)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    # `nux: enabled: false`: no "Join the Dagster community" dialog, which the UI opens late on a localhost origin
    # and which would cover what the tests click.
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    instance = dg.DagsterInstance.from_config(str(home))
    instance.add_dynamic_partitions("dataset", DATASETS)
    instance.dispose()
    return home


@pytest.fixture(scope="module")
def webserver(home):
    port = _free_port()
    log = (home / "webserver.log").open("w")
    env = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    webserver_bin = Path(sys.executable).with_name("dagster-webserver")
    proc = subprocess.Popen(
        [str(webserver_bin), "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                urllib.request.urlopen(f"{url}/server_info", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"dagster-webserver did not come up: {(home / 'webserver.log').read_text()[-2000:]}")
                time.sleep(1)
        yield url
    finally:
        _stop(proc)
        log.close()


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser.new_page(viewport={"width": 1600, "height": 1000})
        browser.close()


def test_catalog_lists_our_assets(webserver, page):
    page.goto(f"{webserver}/assets")
    page.get_by_text("eval_metrics", exact=True).first.wait_for(timeout=60_000)  # the SPA has rendered
    for name in ASSETS:
        assert page.get_by_text(name, exact=True).count() >= 1, name
    assert page.get_by_text("grasp_assets.definitions").count() >= len(ASSETS)
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "dagster_ui.png"))


def test_asset_lists_the_registered_dataset_partitions(webserver, page):
    page.goto(f"{webserver}/assets/skb?view=partitions")
    page.get_by_text("synth-prime", exact=True).first.wait_for(timeout=60_000)
    assert page.get_by_text("hpo", exact=True).count() >= 1
    assert page.get_by_text("Missing (2)").count() == 1  # both registered partitions, neither materialized
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "dagster_ui_partitions.png"))


VARIANT = "hpo+rerank-k20"


@pytest.fixture(scope="module")
def variant_built(home):
    """The variant partition registered beside its base; in the variant, `skb` built, `queries` linked from the base
    (its materialization says `reused_from`), then `skb` rebuilt with other content: `queries` of the variant is
    stale, the base's partitions untouched."""
    from dagster._core.definitions.data_version import DATA_VERSION_TAG

    instance = dg.DagsterInstance.from_config(str(home))
    instance.add_dynamic_partitions("dataset", [VARIANT])

    def built(asset: str, version: str, **metadata) -> None:
        event = dg.AssetMaterialization(asset, partition=VARIANT, tags={DATA_VERSION_TAG: version}, metadata=metadata)
        instance.report_runless_asset_event(event)

    built("skb", "a1")
    built("queries", "b1", reused_from="hpo (b1)")
    built("skb", "a2")
    instance.dispose()
    return VARIANT


def test_a_variant_is_a_partition_of_its_own_with_its_own_history(webserver, page, variant_built):
    page.goto(f"{webserver}/assets/queries?view=partitions")
    page.get_by_text(variant_built, exact=True).first.wait_for(timeout=120_000)
    assert page.get_by_text("hpo", exact=True).count() >= 1 and page.get_by_text("Missing (2)").count() == 1
    page.get_by_text(variant_built, exact=True).first.click()
    page.get_by_text("reused_from").first.wait_for(timeout=120_000)  # the variant's own materialization history
    assert page.get_by_text("hpo (b1)").count() == 1  # linked from the base build
    # its `skb` changed after: stale in the variant only (the UI computes staleness after it shows the history)
    page.get_by_text("Unsynced").first.wait_for(timeout=120_000)
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "dagster_ui_variant.png"))
