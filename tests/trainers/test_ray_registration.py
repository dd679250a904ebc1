"""The launch config's Ray worker setup hook registers the estimator in worker processes.

veRL computes advantages inside its TaskRunner actor, which never imports trainers.verl; the
recipe relies on Ray's ``worker_process_setup_hook`` for that. Ray resolves the hook's
``module.function`` string in each fresh worker and calls it: the first test does exactly that in
a fresh interpreter. The second starts real Ray workers; on a loaded 2-core CI machine Ray takes
minutes to start, so it runs only with ``TERMGYM_TEST_RAY=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl


def _fresh_env() -> dict[str, str]:
    """This process's environment as a fresh Ray worker would have it: the repository importable and no
    veRL platform chosen by a CPU run earlier in this process (``use_cpu_platform`` sets ``VERL_PLATFORM``)."""
    from trainers.verl import launch

    env = {k: v for k, v in os.environ.items() if k not in ("VERL_PLATFORM", "VERL_ENGINE_DEVICE")}
    return {**env, "PYTHONPATH": str(launch.ROOT)}


def _hook() -> str:
    from trainers.verl import launch

    config = launch.compose("grpo", launch.load_overrides("grpo", launch.placeholders(data_dir="/tmp")))
    return config.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook


def test_the_hook_registers_the_estimator_and_trainer_in_a_fresh_process():

    hook = _hook()
    script = (
        "import importlib, sys\n"
        "from verl.trainer.ppo import core_algos\n"
        "assert 'termgym_turn_grpo' not in core_algos.ADV_ESTIMATOR_REGISTRY\n"
        f"module, _, name = {hook!r}.rpartition('.')\n"
        "getattr(importlib.import_module(module), name)()\n"  # what Ray does with the string
        "from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY\n"
        "sys.exit(0 if 'termgym_turn_grpo' in core_algos.ADV_ESTIMATOR_REGISTRY and 'termgym_sync' in TRAINER_REGISTRY"
        " else 3)\n"
    )
    env = _fresh_env()
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_hook_needs_no_verl_on_a_sandbox_node():
    """Ray runs the job's hook in the env actors on sandbox nodes too (docs/cluster.md): there, without
    veRL or torch, it must return, not fail the worker."""

    hook = _hook()
    script = (
        "import importlib, importlib.abc, sys\n"
        "class NoTrainerStack(importlib.abc.MetaPathFinder):\n"  # a node without veRL and torch installed
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('verl', 'torch'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoTrainerStack())\n"
        f"module, _, name = {hook!r}.rpartition('.')\n"
        "getattr(importlib.import_module(module), name)()\n"
        "sys.exit(0 if 'verl' not in sys.modules and 'torch' not in sys.modules else 3)\n"
    )
    env = _fresh_env()
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TERMGYM_TEST_RAY") != "1", reason="starts Ray (minutes on 2 cores): TERMGYM_TEST_RAY=1")
def test_ray_workers_run_the_hook(monkeypatch):
    import ray

    from trainers.verl import launch

    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "240")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": _hook(), "env_vars": {"PYTHONPATH": str(launch.ROOT)}})
    try:
        @ray.remote
        def registered() -> bool:
            from verl.trainer.ppo import core_algos  # the worker imports only veRL itself

            return "termgym_turn_grpo" in core_algos.ADV_ESTIMATOR_REGISTRY

        assert ray.get(registered.remote(), timeout=600)
    finally:
        ray.shutdown()
