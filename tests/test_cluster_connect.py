"""``--ray local`` (lcr.cluster.connect, issue #74): the cluster lcr starts for one run
starts no idle Ray workers ahead of lcr's own (they cost a run on few cores about a
second, bench/ray_start.py), and is shut down when the run closes it. Each check runs
in a fresh process, so no other test's cluster is joined instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'lcr[ray]'")

SCRIPT = """
import json
import ray
from lcr.cluster.connect import connect

cluster = connect("local", 1)
config = ray._private.state.state.get_system_config()
owned, (cpus, _gpus, _largest) = cluster.owned, cluster.offer()
cluster.close()
print(json.dumps({"config": config, "owned": owned, "cpus": cpus,
                  "up_after_close": ray.is_initialized()}))
"""


@pytest.mark.slow  # starts a Ray cluster (several seconds on 2 cores)
def test_a_local_cluster_starts_no_idle_workers_and_closes() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("LCR_RAY_ADDRESS", None)
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["config"].get("prestart_worker_first_driver") is False
    assert said["owned"] and said["cpus"] == (os.cpu_count() or 1)
    assert not said["up_after_close"]
