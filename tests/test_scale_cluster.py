"""Issue 17, item 3: the Ray engine on a real two-node cluster on this machine.

A Ray head and a worker node run as separate ``ray start`` processes on loopback addresses (tests/ray_cluster.py).
A grid of two smoke notebooks x two seeds runs through the cluster; then a small declared suite (notebook 04 in
the smoke profile: six runs in two rounds, LS+ after its cross-entropy run) trains across both nodes, the worker
node is killed while it trains, and every run must still end stored exactly once and load.
Everything the test started is stopped by finalizers, also when it fails.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray engine is the optional extra 'scale': pip install -e '.[scale]'")

from ray_cluster import Cluster  # noqa: E402

from helpers import course  # noqa: E402
from helpers.course import ray_engine  # noqa: E402

pytestmark = pytest.mark.slow
REPO_ROOT = Path(__file__).resolve().parent.parent
SUITE = ["04_informed_label_smoothing_lsplus"]


@pytest.fixture(scope="module")
def cluster(request):
    data_dir = os.environ.get("CALIBMED_DATA_DIR", str(REPO_ROOT / "data"))
    if not (Path(data_dir) / "dermamnist.npz").is_file():
        pytest.skip(f"no dermamnist.npz in {data_dir} (set CALIBMED_DATA_DIR)")
    environment = {
        "CALIBMED_DATA_DIR": data_dir,
        "PYTHONPATH": str(REPO_ROOT),
        "MPLBACKEND": "Agg",
        "CALIBMED_PROGRESS": "final",
    }
    # this driver joins on 127.0.0.1 as the head does (tests/ray_cluster.py, LOOPBACK_ONLY): Ray read that
    # variable when it was imported, so its constant is set here
    constants = ray._private.ray_constants
    saved = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False
    request.addfinalizer(lambda: setattr(constants, "ENABLE_RAY_CLUSTER", saved))
    started = time.perf_counter()
    nodes = Cluster(environment, num_cpus=1, object_store_bytes=80_000_000)
    request.addfinalizer(nodes.shutdown)
    saved_auth = {name: os.environ.get(name) for name in nodes.auth}
    _use_auth(nodes.auth)  # the driver presents the cluster's token
    request.addfinalizer(lambda: _use_auth(saved_auth))
    nodes.add_worker()
    ray.init(address=nodes.address, log_to_driver=False, configure_logging=False)
    request.addfinalizer(ray.shutdown)  # runs before the nodes stop (finalizers run last-in, first-out)
    nodes.wait_for_nodes(2)
    print(f"two-node cluster up in {time.perf_counter() - started:.0f} s")
    return nodes


def _use_auth(settings: dict[str, str | None]) -> None:
    """Set (None: remove) Ray's token variables in this process and make Ray read them again, as Ray itself does
    when it turns token authentication on (ray._private.authentication.authentication_token_setup): its
    configuration was read when ray was imported."""
    from ray._raylet import AuthenticationTokenLoader, Config

    for name, value in settings.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _alive_node_ids() -> set[str]:
    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


def test_a_notebook_grid_runs_through_the_same_cluster_one_folder_per_point(cluster, tmp_path):
    started = time.perf_counter()
    summary = ray_engine.run_grid(
        tmp_path / "sweep", {"seed": [0, 1]}, profile="smoke", selection=["00", "07"], address=cluster.address
    )
    print(f"grid of 2 notebooks x 2 seeds in {time.perf_counter() - started:.0f} s")

    sweep = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    assert [point["folder"] for point in sweep["points"]] == ["seed=0", "seed=1"] == [p["folder"] for p in summary]
    for seed in (0, 1):
        folder = tmp_path / "sweep" / f"seed={seed}"
        course.check_results(folder)  # the point's own summary and results, as `course check` reads them
        for stem in ("00_start_here", "07_multilabel_calibration_and_properness"):
            results = json.loads((folder / "results" / f"{stem}.json").read_text())
            assert (results["profile"], results["config"]["seed"]) == ("smoke", seed)
            assert (folder / "notebooks" / f"{stem}.ipynb").is_file()
    sweep_table = (tmp_path / "sweep" / "summary.md").read_text()
    assert "| seed=1 | 07_multilabel_calibration_and_properness | ok |" in sweep_table


def test_a_declared_suite_trains_across_two_nodes_and_every_run_is_stored_once_after_a_node_dies(cluster, tmp_path):
    if len(_alive_node_ids()) < 2:  # run alone (-k), or after a failed grid test
        cluster.add_worker()
        cluster.wait_for_nodes(2)
    stored, cache = tmp_path / "stored", tmp_path / "cache"
    head_id = ray.get_runtime_context().get_node_id()
    killed = {}

    def kill_the_worker_node(outcome, pending):
        if not killed and pending >= 2:  # both nodes hold a task (one CPU each) and one more waits
            worker = next(node for node in cluster.nodes if node.name.startswith("worker") and node.alive())
            worker.kill()
            killed.update(after=len(outcomes_seen) + 1, pending=pending)
        outcomes_seen.append(outcome)

    outcomes_seen: list[dict] = []
    started = time.perf_counter()
    outcomes = ray_engine.train_declared(
        SUITE,
        "smoke",
        {"device": "cpu"},
        address=cluster.address,
        stored_dir=str(stored),
        cache_dir=str(cache),
        on_outcome=kill_the_worker_node,
    )
    print(f"suite of {len(outcomes)} runs across the cluster in {time.perf_counter() - started:.0f} s")

    assert killed, "the worker node was never killed mid-suite"
    # Ray marks a killed node dead only after its health checks time out (seconds): the suite may end sooner
    deadline = time.monotonic() + 60
    while _alive_node_ids() != {head_id} and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _alive_node_ids() == {head_id}
    keys = [outcome["key"] for outcome in outcomes]
    assert len(keys) == 6 and len(set(keys)) == 6  # CE, LS, LS+ x two recipes; each run returned once
    assert {o["title"].split(",")[0] for o in outcomes[-2:]} == {"LS+"}  # LS+ came in the second round
    assert all(o["node"] == head_id for o in outcomes[killed["after"] :])
    files = sorted(cache.glob("*.pt"))
    assert sorted(path.name.split("-")[0] for path in files) == sorted(keys)  # each run stored exactly once
    assert not stored.exists() or not list(stored.rglob("*.npz"))  # the smoke profile caches, it never stores
    with ray_engine.store_roots(stored, cache):
        assert ray_engine.missing_runs(SUITE, "smoke", {"device": "cpu"}) == []  # every file loads (else: planned)
