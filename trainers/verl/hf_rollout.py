"""A Hugging Face ``generate`` rollout server for veRL, for running veRL's own trainer on CPU in tests.

veRL's v1 trainer generates through rollout *replicas* (vLLM, SGLang, TensorRT-LLM servers) that
need a GPU. This module stands in for exactly that piece and speaks the same protocol:

* :class:`HFRolloutReplica` — a ``RolloutReplica`` (veRL's ``RolloutReplicaRegistry``, name
  ``termgym_hf``) whose ``launch_servers`` starts one :class:`HFTokenServer` Ray actor per replica;
* :class:`HFTokenServer` — the server actor: ``generate(request_id, *, prompt_ids, sampling_params)
  -> TokenOutput`` tagged with ``extra_fields["global_steps"]`` (the weight version, as vLLM's server
  does), plus the control calls veRL makes (``wake_up``, ``sleep``, ``abort_all_requests``, ...);
  generation is :class:`~trainers.verl.tiny_model.TinyTokenServer` over the HF model, optionally
  with scripted turns so episodes reach real commands and submissions;
* :class:`HFServerAdapter` — the ``BaseRollout`` inside veRL's actor worker (``_ROLLOUT_REGISTRY``
  key ``("termgym_hf", "async")``): veRL's weight sync (``update_weights``) hands it the trained
  parameters, which it loads into the server, so every step generates with the updated policy.

:func:`setup_cpu_worker` is the Ray ``worker_process_setup_hook`` for such a run: it selects the CPU
platform (:mod:`trainers.verl.cpu_platform`), registers the above and what the recipe's hook
registers (:func:`trainers.verl.registry.register_with_verl`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from typing import Any

import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ROLLOUT_NAME = "termgym_hf"
#: ``actor_rollout_ref.rollout.custom.termgym_scripts``: marker -> scripted turns (see TinyTokenServer).
SCRIPTS_KEY = "termgym_scripts"
#: ``actor_rollout_ref.rollout.custom.termgym_choices``: single-token turns to sample among (see TinyTokenServer).
CHOICES_KEY = "termgym_choices"
#: ``actor_rollout_ref.rollout.custom.termgym_server_device``: where the server's model runs (default cpu, fp32;
#: cuda runs it in bf16 next to the actor, as gpu_step_split does).
DEVICE_KEY = "termgym_server_device"


def _server_name(replica_rank: int) -> str:
    return f"termgym_hf_server_{replica_rank}"


@ray.remote
class HFTokenServer:
    """One rollout server: HF ``generate`` on the replica's model, veRL's server-actor calls."""

    def __init__(self, model_path: str, scripts: dict[str, list[str | None]] | None = None, seed: int = 0,
                 choices: list[str] | None = None, device: str = "cpu") -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from trainers.verl.tiny_model import TinyTokenServer

        tokenizer = AutoTokenizer.from_pretrained(model_path)
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
        model = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=dtype).to(device)
        model.eval()
        self.generator = TinyTokenServer(model, tokenizer, scripts=scripts or {}, seed=seed, choices=choices or ())
        self.global_steps: int | None = None
        self.weight_updates = 0

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any):
        output = await self.generator.generate(request_id, prompt_ids=list(prompt_ids), sampling_params=sampling_params)
        output.extra_fields = {**output.extra_fields, "global_steps": self.global_steps}
        return output

    async def load_weights(self, state: dict[str, torch.Tensor], global_steps: int | None) -> int:
        """Load trained parameters (HF names); returns how many tensors were loaded."""
        model = self.generator.model
        own = model.state_dict()
        unknown = sorted(set(state) - set(own))
        if unknown:
            raise ValueError(f"weight sync sent parameters the rollout model does not have: {unknown[:5]}")
        model.load_state_dict({k: v.to(model.device) for k, v in state.items()}, strict=False)
        self.global_steps = global_steps
        self.weight_updates += 1
        return len(state)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def stats(self) -> dict[str, Any]:
        """What the server did (for tests): generations, scripted turns, weight updates, weight version."""
        calls = self.generator.calls
        return {"generations": len(calls), "scripted": sum(c["scripted"] for c in calls),
                "weight_updates": self.weight_updates, "global_steps": self.global_steps}

    # Memory control calls: nothing is cached between calls, so there is nothing to free or restore.
    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict[str, Any]:
        return {}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **kwargs: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


def _replica_base():
    from verl.workers.rollout.replica import RolloutReplica

    return RolloutReplica


class HFRolloutReplica(_replica_base()):
    """A rollout replica served by one :class:`HFTokenServer` (CPU, no tensor parallelism)."""

    async def launch_servers(self) -> None:
        custom = self.config.custom or {}
        scripts = custom.get(SCRIPTS_KEY) or {}
        if isinstance(scripts, str):
            scripts = json.loads(scripts)
        choices = custom.get(CHOICES_KEY) or []
        if isinstance(choices, str):
            choices = json.loads(choices)
        device = str(custom.get(DEVICE_KEY) or "cpu")
        name = _server_name(self.replica_rank)
        # On a GPU the server shares the device veRL's actor holds (as a colocated vLLM does): Ray must
        # not hide it from an actor that requests no GPU.
        env = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"} if device != "cpu" else {}
        # Beside veRL's workers, on the node that launches it (as a vLLM server sits on its GPUs): asking for
        # no CPU, it could otherwise land on any node, e.g. a sandbox node of a cluster (docs/cluster.md).
        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        server = HFTokenServer.options(name=name, max_concurrency=self.max_concurrency, num_cpus=0,
                                       scheduling_strategy=here,
                                       runtime_env={"env_vars": env} if env else None).remote(
            self.model_config.path, scripts=scripts, seed=self.replica_rank, choices=list(choices), device=device)
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"ray://{name}"
        await server.stats.remote()  # wait until the model is loaded

    def rollout_worker_use_gpu(self) -> bool:
        return False


def _rollout_base():
    from verl.workers.rollout.base import BaseRollout

    return BaseRollout


class HFServerAdapter(_rollout_base()):
    """veRL's in-worker rollout handle: forwards weight syncs to this rank's :class:`HFTokenServer`."""

    def __init__(self, config, model_config, device_mesh, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        world = self.config.tensor_model_parallel_size * self.config.data_parallel_size
        self.replica_rank = rank // world
        self.is_leader = rank % world == 0
        self.sleep_level = 2

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    async def update_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                             wire_format: str = "named_tensors", **kwargs: Any) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"{type(self).__name__} takes full named tensors, not {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise ValueError(f"{type(self).__name__} takes merged weights: set actor_rollout_ref.model.lora.merge=true")
        state = {}
        for name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", copy=True)
        if self.is_leader:
            server = ray.get_actor(_server_name(self.replica_rank))
            await server.load_weights.remote(state, kwargs.get("global_steps"))


def register_rollout() -> None:
    """Register the ``termgym_hf`` rollout with veRL (idempotent)."""
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: HFRolloutReplica)
    base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{__name__}.HFServerAdapter"


def setup_gpu_worker() -> None:
    """Ray ``worker_process_setup_hook`` for veRL on a GPU with this rollout (gpu_step_split): no CPU platform."""
    from trainers.verl.registry import register_with_verl

    register_rollout()
    register_with_verl()


def setup_cpu_worker() -> None:
    """Ray ``worker_process_setup_hook`` for veRL on CPU: platform, rollout, estimator.

    veRL 0.9.1 builds its process-group backend as ``"cpu:gloo,<device>:<backend>"``, which torch
    rejects when the device is the CPU itself; a veRL worker process (``WG_BACKEND=ray``) therefore
    gets its single gloo group here, before veRL looks (it only initialises one if none exists).
    """
    from trainers.verl.cpu_platform import use_cpu_platform
    from trainers.verl.registry import register_with_verl

    use_cpu_platform()
    register_rollout()
    register_with_verl()
    if os.environ.get("WG_BACKEND") == "ray" and "MASTER_ADDR" in os.environ and not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            backend="gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
            init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        )
