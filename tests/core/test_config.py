"""Explicit configuration: EnvConfig, env vs suite options, the import-path loader, registration."""

from __future__ import annotations

import dataclasses
import warnings

import gymnasium as gym
import pytest
from hello_tasks import make_hello_tasks

import termgym
from termgym import CommandTask, ListSuite
from termgym.config import EnvConfig, resolve_suite, split_options, suite_option_names
from termgym.env import TerminalEnv
from termgym.imports import is_import_path, load_object
from termgym.protocols import make_protocol
from termgym.tasks.harbor.suite import HarborSuite

# -- EnvConfig -------------------------------------------------------------------------------------


def test_env_config_is_frozen_and_copies_its_option_dicts():
    options = {"runtime": "host"}
    config = EnvConfig(backend="local", max_steps=7, sandbox_options=options)
    options["runtime"] = "changed"
    assert config.sandbox_options == {"runtime": "host"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_steps = 3  # type: ignore[misc]
    assert config.replace(max_steps=3).max_steps == 3 and config.max_steps == 7


@pytest.mark.parametrize(("changes", "message"), [
    ({"max_steps": 0}, "max_steps must be at least 1, got 0"),
    ({"max_steps": 2.5}, "max_steps must be at least 1, got 2.5"),
    ({"mode": "forking"}, "mode must be one of persistent, stateless, not 'forking'"),
    ({"time_limit": -1}, "time_limit must be a positive number or None, got -1"),
    ({"command_timeout": "10"}, "command_timeout must be a positive number or None, got '10'"),
    ({"backend": ""}, "EnvConfig.backend must be a backend name"),
])
def test_env_config_refuses_bad_values_by_name(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EnvConfig(**changes)


def test_env_config_refuses_a_non_mapping_for_options():
    with pytest.raises(TypeError, match="sandbox_options must be a mapping of keyword arguments, not list"):
        EnvConfig(sandbox_options=["runtime"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="EnvConfig has no option.s. max_step; it has: backend"):
        EnvConfig().replace(max_step=3)


def test_split_options_tells_env_keys_from_suite_keys():
    config, suite_options = split_options({"backend": "docker", "split": "test", "path": "x", "seeds": 3},
                                          EnvConfig(max_steps=9), {"families": ["crypto"]})
    assert (config.backend, config.split, config.max_steps) == ("docker", "test", 9)
    assert suite_options == {"families": ["crypto"], "path": "x", "seeds": 3}
    with pytest.raises(TypeError, match="suite option.s. path given twice"):
        split_options({"path": "a", "suite_options": {"path": "b"}})


def test_env_keeps_config_and_suite_options_apart(hello_suite):
    env = TerminalEnv(lambda n=4: ListSuite(make_hello_tasks(n)), EnvConfig(max_steps=5), n=2, mode="stateless")
    assert env.config == EnvConfig(max_steps=5, mode="stateless")
    assert env.suite_options == {"n": 2} and len(env.suite) == 2
    assert (env.max_steps, env.mode, env.backend) == (5, "stateless", "local")  # read from the config
    env.close()


def test_an_option_neither_env_nor_suite_takes_is_named():
    with pytest.raises(TypeError, match=r"unknown option.s. 'max_step': not an env option \(backend, .*max_steps.*\) "
                                        r"nor an option of suite HarborSuite \(tasks_dir, backend, task_ids, dataset, registry, "
                                        r"force_build, timeout_multiplier, network\)"):
        gym.make("termgym/Harbor-v0", max_step=3)
    # a factory taking **options passes them on; the class's refusal still says what the env takes
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'sedes'.*not an env option either: backend"):
        resolve_suite(lambda **options: ListSuite(make_hello_tasks(1), **options), sedes=3)


def test_gym_make_still_takes_env_and_suite_options_side_by_side(tmp_path):
    env = gym.make("termgym/Harbor-v0", backend="local", split="all", max_steps=3, task_ids=["log-error-codes"])
    try:
        assert env.unwrapped.config.max_steps == 3 and env.unwrapped.config.split == "all"
        assert env.unwrapped.suite_options == {"task_ids": ["log-error-codes"]}
        assert env.unwrapped.suite.task_ids("all") == ["log-error-codes"]
    finally:
        env.close()


def test_suite_option_names_follow_the_factory_signature():
    assert suite_option_names(HarborSuite) == ("tasks_dir", "backend", "task_ids", "dataset", "registry",
                                               "force_build", "timeout_multiplier", "network")
    assert suite_option_names(lambda **kw: None) is None


# -- protocols get what they need without side effects ---------------------------------------------


class CountingTask(CommandTask):
    """Counts :meth:`sandbox_spec` calls (a LIVEWEB task opens an episode there)."""

    specs = 0

    def sandbox_spec(self):
        type(self).specs += 1
        return super().sandbox_spec()


@pytest.mark.parametrize("protocol", ["minisweagent", "toolcall"])
def test_protocols_read_the_workdir_without_building_a_sandbox_spec(protocol):
    task = CountingTask("t", "Say hi.", grade_command="true", workdir="/srv/job")
    CountingTask.specs = 0
    prompt = make_protocol(protocol).task_prompt(task)
    assert "/srv/job" in prompt and CountingTask.specs == 0
    env = TerminalEnv(ListSuite([task]), protocol=protocol)
    env.reset(seed=0)
    assert CountingTask.specs == 1  # the env's own call, once per episode
    env.close()


def test_the_shell_mode_in_the_prompt_comes_from_the_env_config(hello_suite):
    for mode, note in (("persistent", "keeps its state"), ("stateless", "cd and variables do not carry over")):
        env = TerminalEnv(hello_suite, mode=mode)
        prompt, _ = env.reset(seed=0)
        assert note in prompt, mode
        env.close()
    # an explicit protocol option still wins over the sandbox
    env = TerminalEnv(hello_suite, mode="persistent", protocol_options={"mode": "stateless"})
    assert "cd and variables do not carry over" in env.reset(seed=0)[0]
    env.close()


# -- one import-path loader ------------------------------------------------------------------------


def test_load_object_resolves_dotted_attributes_and_names():
    assert load_object("termgym.config:EnvConfig.replace") is EnvConfig.replace
    assert load_object("toolcall", names={"toolcall": "termgym.protocols.toolcall:ToolCallProtocol"}).name == "toolcall"
    assert is_import_path("a.b:c") and not is_import_path("a.b") and not is_import_path("a:b:c")


@pytest.mark.parametrize(("path", "message"), [
    ("termgym.config", "suite must be an import path 'module:attr', not 'termgym.config'"),
    ("no_such_module_q:x", "suite 'no_such_module_q:x': cannot import module 'no_such_module_q'"),
    ("termgym.config:Nope", "suite 'termgym.config:Nope': module 'termgym.config' has no attribute 'Nope'"),
])
def test_load_object_names_what_is_wrong(path, message):
    with pytest.raises(ValueError, match=message):
        load_object(path, what="suite")


def test_every_registry_uses_the_one_loader():
    with pytest.raises(ValueError, match="unknown protocol 'nope'; choose one of minisweagent, toolcall, terminus"):
        make_protocol("nope")
    with pytest.raises(ValueError, match="suite 'termgym.config:Missing': module 'termgym.config' has no attribute"):
        resolve_suite("termgym.config:Missing")


# -- registration ----------------------------------------------------------------------------------


def test_register_suite_warns_when_it_replaces_an_id():
    env_id = "tests/ConfigOverride-v0"
    gym.registry.pop(env_id, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the first registration is silent
        termgym.register_suite(env_id, "hello_tasks:suite", max_steps=2)
    with pytest.warns(UserWarning, match="replacing the registered environment 'tests/ConfigOverride-v0' "
                                         ".was termgym.env:TerminalEnv with 'hello_tasks:suite'"):
        termgym.register_suite(env_id, lambda: ListSuite(make_hello_tasks(1)), max_steps=3)
    assert gym.registry[env_id].kwargs["max_steps"] == 3
    gym.registry.pop(env_id)


def test_termgym_list_builds_each_suite_with_its_suite_options_only(capsys):
    import argparse

    from termgym.commands import list as list_command

    env_id = "tests/ListOptions-v0"
    gym.registry.pop(env_id, None)
    # env options (max_steps, mode) and a suite option (n) side by side, as gym.make takes them
    termgym.register_suite(env_id, lambda n=5: ListSuite(make_hello_tasks(n), name="listopts"),
                           max_steps=2, mode="stateless", n=3)
    try:
        assert list_command.run(argparse.Namespace(no_counts=False)) == 0
    finally:
        gym.registry.pop(env_id)
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith(env_id))
    assert line.split()[1:] == ["listopts", "3", "train=3"]


def test_the_prompt_knows_the_shell_mode_before_any_sandbox_starts(hello_suite):
    # e.g. RL rows are built from the opening prompt without starting a sandbox
    env = TerminalEnv(hello_suite, mode="stateless")
    assert "cd and variables do not carry over" in env.protocol.task_prompt(hello_suite.load("hello-0"))
    assert TerminalEnv(hello_suite, protocol="toolcall", mode="stateless").protocol.shell_mode == "stateless"
