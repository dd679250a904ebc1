"""``termgym eval``: benchmark an agent on an environment (see docs/evaluate.md)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

EXIT_INFRA = 3
#: Every episode ended in an agent error: the agent never ran properly (endpoint down, bad model name…).
EXIT_AGENT = 4


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval", help="benchmark an agent on an environment (resumable; pass@k; Ray scale-out)",
        description="Run an agent on a termgym environment's tasks and write one JSON per episode plus a "
                    "summary to --output-dir. Rerunning with the same --output-dir resumes: finished "
                    "episodes are skipped, infrastructure failures retried. Exit status: 0 when every "
                    f"episode was scored, {EXIT_INFRA} when some still ended in an infrastructure failure, "
                    f"{EXIT_AGENT} when every episode ended in an agent error, 2 on bad arguments.")
    p.add_argument("env_id", help="environment id (termgym/SweSynth-v0, a registered id) or alias (swe-synth)")
    g = p.add_argument_group("agent")
    g.add_argument("-a", "--agent", default="openai", help=_agent_help())
    g.add_argument("-m", "--model", help="model name for the endpoint (default: the first one it lists)")
    g.add_argument("--base-url", help="OpenAI-compatible API root, e.g. http://localhost:8000/v1 "
                                      "(default $OPENAI_BASE_URL or OpenAI)")
    g.add_argument("--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)")
    g.add_argument("--temperature", type=float)
    g.add_argument("--max-tokens", type=int, help="completion tokens per reply")
    g.add_argument("--request-timeout", type=float, help="seconds per model request (default 120)")
    g.add_argument("--max-retries", type=int, help="retries per model request on transient failures (default 5)")
    g.add_argument("--logprobs", action="store_true", default=None, help="record the sampled tokens' logprobs")
    g.add_argument("--return-token-ids", action="store_true", default=None,
                   help="ask a vLLM server for prompt/completion token ids and record them")
    g.add_argument("--agent-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra agent constructor argument (VALUE is JSON if it parses, else a string); repeatable")
    g = p.add_argument_group("tasks")
    g.add_argument("--task-ids", help="selection such as 101-110,200 or hello,world: exact ids; numbers match "
                                      "numeric ids by value, otherwise 0-based positions in the split")
    g.add_argument("--split", help="suite split to draw tasks from (default: the suite's default)")
    g.add_argument("--limit", type=int, help="keep only the first N selected tasks")
    g.add_argument("-k", "--attempts", type=int, default=1, help="attempts per task (pass@k), default 1")
    g.add_argument("--seed", type=int, default=0, help="base seed; attempt i resets with seed+i")
    g = p.add_argument_group("environment")
    g.add_argument("--backend", choices=("local", "docker"))
    g.add_argument("--protocol", help="minisweagent, toolcall, terminus or module:Class")
    g.add_argument("--mode", choices=("persistent", "stateless"))
    g.add_argument("--max-steps", type=int)
    g.add_argument("--time-limit", type=float, help="wall-clock seconds per episode for the agent phase")
    g.add_argument("--command-timeout", type=float, help="seconds per command")
    g.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra gym.make keyword (VALUE is JSON if it parses); repeatable")
    g.add_argument("-d", "--dataset", metavar="NAME@VERSION",
                   help="Harbor: a registered dataset (terminal-bench@2.0), downloaded into termgym's cache on first "
                        "use and read from there offline afterwards (termgym harbor download)")
    g.add_argument("--registry", help="Harbor: the registry JSON for --dataset (path or URL; default "
                                      "$TERMGYM_HARBOR_REGISTRY or Harbor's public registry)")
    g.add_argument("--force-build", action="store_true", default=None,
                   help="Harbor: build each task's image from its Dockerfile even when it names a prebuilt docker_image")
    g.add_argument("--timeout-multiplier", type=float,
                   help="Harbor: scale every agent, verifier and build timeout (as harbor run --timeout-multiplier)")
    g.add_argument("--no-network", action="store_true", default=None,
                   help="Harbor: no sandbox gets the internet; tasks whose verifier needs it are refused with the reason")
    g.add_argument("--process-rewards", action="store_true",
                   help="wrap the env in ProcessReward (the 'progress' table, docs/rewards.md): step rewards and reward events are "
                        "recorded (the score stays the grade's)")
    g.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (where custom suites or agents are registered); repeatable")
    g = p.add_argument_group("run")
    g.add_argument("-n", "--concurrency", type=int, default=4, help="episodes in flight (default 4)")
    g.add_argument("-o", "--output-dir", help="run directory (default runs/<env>__<agent or model>)")
    g.add_argument("--episode-timeout", type=float, help="hard wall-clock cap per episode, agent included")
    g.add_argument("--infra-retries", type=int, default=2,
                   help="times an episode is restarted after an infrastructure failure (default 2)")
    g.add_argument("--infra-backoff", type=float, default=2.0, help="first delay before such a restart, seconds")
    g.add_argument("--ray-address", help="spread episodes over a Ray cluster: auto, ray://host:10001, host:port")
    g.add_argument("--ray-cpus-per-episode", type=float, default=1.0, help="Ray CPUs reserved per episode")
    g.add_argument("--progress", choices=("auto", "bar", "lines", "off"), default="auto",
                   help="bar: a live progress bar; lines: one line per finished episode; auto (default): a bar "
                        "when stderr is a terminal, lines otherwise")
    g.add_argument("--record", action="store_true",
                   help="kept for compatibility, changes nothing: every episode is recorded in "
                        "OUTPUT_DIR/episodes.jsonl (termgym.wrappers.recording format)")
    g.add_argument("--quiet", action="store_true", help="no progress output (--progress off)")
    g.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    p.set_defaults(func=run)


def _agent_help() -> str:
    from termgym.agents import AGENTS

    described = {"openai": "an OpenAI-compatible endpoint (default; --model, --base-url)",
                 "oracle": "the task's reference solution", "nop": "does nothing",
                 "replay": "replays recorded actions", "minisweagent": "mini-swe-agent's DefaultAgent",
                 "harbor": "Harbor's agents, e.g. terminus-2 (--agent-arg harbor_agent=...; Python >= 3.12)",
                 "cli": "a command-line agent (codex, claude-code...) run in the sandbox (--agent-arg recipe=...)"}
    names = "; ".join(f"{name}: {described.get(name, name)}" for name in AGENTS)
    return f"the agent: {names}; or an import path pkg.module:Class"


def parse_key_values(items: list[str], flag: str) -> dict[str, Any]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``; values are JSON when they parse."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise ValueError(f"{flag} expects KEY=VALUE with KEY a Python identifier, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def build_config(args: argparse.Namespace):
    from termgym.evaluation.runner import EvalConfig

    agent_options = parse_key_values(args.agent_arg, "--agent-arg")
    flags = {"model": args.model, "base_url": args.base_url, "api_key_env": args.api_key_env,
             "temperature": args.temperature, "max_tokens": args.max_tokens, "timeout": args.request_timeout,
             "max_retries": args.max_retries, "logprobs": args.logprobs, "return_token_ids": args.return_token_ids}
    agent_options.update({k: v for k, v in flags.items() if v is not None})
    env_kwargs = parse_key_values(args.env_arg, "--env-arg")
    env_flags = {"backend": args.backend, "protocol": args.protocol, "mode": args.mode, "max_steps": args.max_steps,
                 "time_limit": args.time_limit, "command_timeout": args.command_timeout}
    env_kwargs.update({k: v for k, v in env_flags.items() if v is not None})
    harbor_flags = {"dataset": args.dataset, "registry": args.registry, "force_build": args.force_build,
                    "timeout_multiplier": args.timeout_multiplier, "network": "off" if args.no_network else None}
    env_kwargs.update({k: v for k, v in harbor_flags.items() if v is not None})
    output_dir = args.output_dir or default_output_dir(args.env_id, args.agent, agent_options.get("model"))
    progress = "off" if args.quiet else args.progress
    return EvalConfig(
        env_id=args.env_id, output_dir=output_dir, agent=args.agent, agent_options=agent_options,
        env_kwargs=env_kwargs, task_ids=args.task_ids, split=args.split, limit=args.limit,
        attempts=args.attempts, concurrency=args.concurrency, seed=args.seed, episode_timeout=args.episode_timeout,
        infra_retries=args.infra_retries, infra_backoff=args.infra_backoff, imports=args.imports,
        ray_address=args.ray_address, ray_cpus_per_episode=args.ray_cpus_per_episode,
        process_rewards=args.process_rewards, record=args.record, progress=progress)


def harbor_preflight(env_kwargs: dict[str, Any]) -> str | None:
    """Before a run of Harbor tasks: how many need the internet to grade, and what this run does about it."""
    from termgym.config import split_options
    from termgym.tasks.harbor.suite import HarborSuite

    # where the episodes run (``ray``: on other nodes) does not change which tasks need the internet
    env_config, suite_options = split_options({k: v for k, v in env_kwargs.items() if k != "ray"})
    suite = HarborSuite(**suite_options)
    ids = list(suite.task_ids(env_config.split))
    online = {tid: suite.load(tid).network_needs(("verifier",)) for tid in ids}
    online = {tid: needs for tid, needs in online.items() if needs}
    if not online:
        return f"preflight: none of the {len(ids)} task(s) needs the internet to grade"
    first = next(iter(online.items()))
    policy = ("refused (--no-network): they cannot grade offline" if suite.run_options["network"] == "off"
              else "run with the network their task.toml allows; without internet they cannot grade")
    return (f"preflight: {len(online)} of {len(ids)} task(s) need the internet to grade (e.g. {first[0]}: "
            f"{first[1][0]}); {policy} (termgym harbor list shows each)")


def _harbor_preflight(config: Any) -> None:
    from termgym.evaluation.runner import resolve_env_id

    try:
        if resolve_env_id(config.env_id) != "termgym/Harbor-v0":
            return
        message = harbor_preflight(dict(config.env_kwargs))
    except Exception:  # the run itself reports a suite that cannot load
        return
    if message:
        print(message, file=sys.stderr)


def default_output_dir(env_id: str, agent: str, model: str | None) -> str:
    def slug(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")

    return f"runs/{slug(env_id)}__{slug(model or agent)}"


def run(args: argparse.Namespace) -> int:
    from termgym.evaluation.results import format_summary
    from termgym.evaluation.runner import run_evaluation

    try:
        config = build_config(args)
        if not args.quiet:
            _harbor_preflight(config)
        outcome = run_evaluation(config)
    except (ValueError, TypeError) as exc:
        print(f"termgym eval: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(outcome.summary, indent=2))
    else:
        print(format_summary(outcome.summary, outcome.run_seconds))
        print(f"ran {outcome.ran} episode(s), skipped {outcome.skipped} already finished; results in "
              f"{outcome.run_dir.path} (termgym view {outcome.run_dir.path} for the report)")
    summary = outcome.summary
    if summary["infra_errors"]:
        return EXIT_INFRA
    if summary["episodes"] and summary["agent_errors"] == summary["episodes"]:
        print(f"termgym eval: every episode ({summary['episodes']}) ended in an agent error, so the scores say "
              f"nothing about the model: check the agent's endpoint and options (errors in {outcome.run_dir.path})",
              file=sys.stderr)
        return EXIT_AGENT
    return 0
