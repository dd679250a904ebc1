"""Real multi-node Ray clusters on this machine (:func:`termgym.remote.local_cluster.local_cluster`).

``sandbox_cluster``: a head without sandbox slots and two sandbox nodes with ``{"termgym_sandbox": 2}``,
1 CPU each and a 100 MB object store; the head checks node health every 300 ms so a killed raylet is
declared dead in about a second. Every node imports from this folder (``remote_tasks``) and the
repository. Everything is stopped at teardown.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="needs Ray: pip install 'termgym[eval]'")
if shutil.which("bwrap") is None:
    pytest.skip("the remote tests run sandboxes: they need bubblewrap (apt-get install bubblewrap)",
                allow_module_level=True)

from termgym.remote.local_cluster import LocalCluster, local_cluster  # noqa: E402 - after the skips

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(HERE) not in sys.path:  # remote_tasks: imported here and, through PYTHONPATH, on every node
    sys.path.insert(0, str(HERE))
SANDBOX_SLOTS = 2


@pytest.fixture(scope="module")
def sandbox_cluster():
    """A head (no ``termgym_sandbox``) and two sandbox nodes (2 slots each), stopped at teardown."""
    with local_cluster(workers=2, worker_resources={"termgym_sandbox": SANDBOX_SLOTS}, pythonpath=[HERE, REPO]) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def driver(sandbox_cluster):
    """This process connected to the cluster as a driver (it runs no sandbox itself), nodes identified."""
    import ray
    import remote_tasks

    with sandbox_cluster.driver_env():
        ray.init(**sandbox_cluster.init_options(), configure_logging=False, log_to_driver=False)
        try:
            check_nodes(sandbox_cluster)
            remote_tasks.register()
            yield sandbox_cluster
        finally:
            ray.shutdown()


def check_nodes(cluster: LocalCluster, slots: int = SANDBOX_SLOTS) -> None:
    """Identify the nodes; the head offers no sandbox slot, each worker ``slots``."""
    import ray

    alive = [n for n in ray.nodes() if n["Alive"]]
    assert len(alive) == 1 + len(cluster.workers), alive
    cluster.identify()
    offered = {n["NodeID"]: n["Resources"].get("termgym_sandbox", 0) for n in alive}
    assert offered[cluster.head.node_id] == 0 and all(offered[w.node_id] == slots for w in cluster.workers)
