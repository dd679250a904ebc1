"""``termgym play ID``: type commands into an episode yourself, to feel the environment."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("play", help="play an episode by typing shell commands")
    parser.add_argument("env_id", help="environment id, e.g. termgym/SweSynth-v0")
    parser.add_argument("--task-id", help="play this task (default: one drawn from --seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default=None, help="sandbox backend: local or docker")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--oracle", action="store_true", help="play the task's reference solution instead")
    parser.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="extra gym.make argument (repeatable); VALUE is parsed as JSON when it can be")
    parser.set_defaults(func=run)


def parse_env_args(pairs: list[str]) -> dict:
    """``["k=v", ...]`` -> kwargs, values parsed as JSON when possible (numbers, booleans, lists)."""
    import json

    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"--env-arg expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    import asyncio

    import gymnasium as gym

    import termgym  # noqa: F401 - registers the ids
    from termgym.agents.loop import run_episode

    kwargs = parse_env_args(args.env_arg)
    if args.backend:
        kwargs["backend"] = args.backend
    if args.max_steps:
        kwargs["max_steps"] = args.max_steps
    env = gym.make(args.env_id, **kwargs)
    options = {"task_id": args.task_id} if args.task_id else None
    try:
        asyncio.run(run_episode(env, TerminalPlayer(env, oracle=args.oracle), seed=args.seed, options=options))
    finally:
        env.close()
        sys.stdout.flush()
    return 0


class TerminalPlayer:
    """The agent loop's policy for ``termgym play``: a person typing commands, or the task's oracle.

    Returns ``None`` (stop, ungraded) on Ctrl-D or when the oracle's messages run out.
    """

    def __init__(self, env, *, oracle: bool = False) -> None:
        self.env = env
        self.oracle = oracle
        self.scripted: list | None = None

    def start(self, prompt: str, info: dict) -> None:
        from termgym.env import oracle_actions, terminal_env

        print(f"\x1b[1mtask {info['task_id']}\x1b[0m\n{prompt}\n")
        print("Type a shell command per line; 'submit' (optionally followed by an answer) ends the episode, "
              "Ctrl-D quits.\n")
        if self.oracle:
            self.scripted = oracle_actions(terminal_env(self.env))

    def act(self, observation: str, info: dict):
        if self.scripted is not None:
            if not self.scripted:
                return None
            action = self.scripted.pop(0)
            print(f"\x1b[33m$ {action}\x1b[0m")
            return action
        protocol = self.env.get_wrapper_attr("protocol")
        while True:
            try:
                line = input("\x1b[33m$ \x1b[0m")
            except EOFError:
                print()
                return None
            if not line.strip():
                continue
            if line.strip().split()[0] == "submit":
                return protocol.submit_message(line.strip()[len("submit"):].strip())
            return protocol.oracle_message(line)

    def observe(self, step) -> None:
        print(step.observation)
        if step.done:
            print(f"\n\x1b[1mepisode over ({step.info.get('end_reason')}): reward {step.reward}\x1b[0m")
            print(step.info.get("grade"))
