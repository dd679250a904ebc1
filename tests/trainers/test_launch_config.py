"""The launch configs compose against veRL's own Hydra schema; unknown keys fail."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

from omegaconf import OmegaConf  # noqa: E402

from trainers.verl import launch  # noqa: E402


@pytest.fixture(scope="module")
def values(tmp_path_factory):
    return launch.placeholders(data_dir=str(tmp_path_factory.mktemp("data")), model="Qwen/Qwen3-4B",
                               experiment="test", ckpt_dir=str(tmp_path_factory.mktemp("ckpt")))


@pytest.fixture(scope="module")
def grpo(values):
    return launch.compose("grpo", launch.load_overrides("grpo", values))


def test_grpo_recipe_composes_with_the_issue_numbers(grpo, values):
    rollout = grpo.actor_rollout_ref.rollout
    assert grpo.algorithm.adv_estimator == "termgym_turn_grpo"
    assert grpo.actor_rollout_ref.model.lora_rank == 64
    assert rollout.n == 8 and rollout.temperature == 0.7 and rollout.tensor_model_parallel_size == 1
    assert rollout.name == "vllm" and rollout.mode == "async"
    assert rollout.agent.default_agent_loop == "termgym_agent"
    assert grpo.trainer.n_gpus_per_node == 1 and grpo.trainer.resume_mode == "auto"
    assert list(grpo.trainer.logger) == ["console"]  # W&B is opt-in (--wandb)
    assert grpo.data.max_prompt_length + grpo.data.max_response_length <= rollout.max_model_len
    assert grpo.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook == "trainers.verl.registry.register_with_verl"
    assert grpo.trainer.default_local_dir == values["CKPT_DIR"]


def test_grpo_sections_convert_to_verls_dataclasses(grpo):
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import RolloutConfig

    resolved = OmegaConf.create(OmegaConf.to_container(grpo, resolve=True))  # interpolations need the root
    rollout = omega_conf_to_dataclass(resolved.actor_rollout_ref.rollout, RolloutConfig)
    assert rollout.response_length == 12288 and rollout.prompt_length == 4096
    actor = omega_conf_to_dataclass(resolved.actor_rollout_ref.actor)
    assert actor.ppo_mini_batch_size == 8 and actor.use_dynamic_bsz


def test_the_agent_loop_registry_file_loads(grpo):
    import importlib

    entries = OmegaConf.load(grpo.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    (entry,) = entries
    module, _, name = entry._target_.rpartition(".")
    assert entry.name == "termgym_agent" and hasattr(importlib.import_module(module), name)
    assert int(entry.max_tokens_per_turn) == 4096


def test_sft_recipe_composes(values):
    sft = launch.compose("sft", launch.load_overrides("sft", values))
    assert sft.model.lora_rank == 64 and sft.data.messages_key == "messages"
    assert sft.trainer.total_training_steps == 500


@pytest.mark.parametrize("typo", [
    "actor_rollout_ref.rollout.tempreature=0.7",
    "algorithm.adv_estimater=grpo",
    "trainer.save_frequency=100",
])
def test_a_misspelled_key_fails_composition(values, typo):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        launch.compose("grpo", launch.load_overrides("grpo", values) + [typo])


def test_a_missing_placeholder_is_named(values):
    partial = {k: v for k, v in values.items() if k != "MODEL"}
    with pytest.raises(ValueError, match="MODEL"):
        launch.load_overrides("grpo", partial)


def test_command_lines(values):
    grpo = launch.command("grpo", launch.load_overrides("grpo", values))
    assert grpo[1:3] == ["-m", "verl.trainer.main_ppo"] and "actor_rollout_ref.rollout.n=8" in grpo
    sft = launch.command("sft", launch.load_overrides("sft", values))
    assert sft[0] == "torchrun" and "verl.trainer.sft_trainer" in sft
