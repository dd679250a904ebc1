"""``termgym liveweb``: look at the LIVEWEB world and its tasks from the host.

    termgym liveweb serve --seed 7 --port 8080     serve one world (all sites) for browsing
    termgym liveweb show liveweb-cross-00042       a task's questions and the answers right now
"""

from __future__ import annotations

import argparse
import json
import time


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("liveweb", help="serve the simulated LIVEWEB world or show a task's answers")
    sub = parser.add_subparsers(dest="liveweb_command", metavar="ACTION")
    serve = sub.add_parser("serve", help="serve one world's sites on a local port (Host header picks the site)")
    serve.add_argument("--seed", type=int, default=0, help="world seed (default 0)")
    serve.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 = any)")
    serve.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second (default 1)")
    serve.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (default: never)")
    show = sub.add_parser("show", help="print a task's instruction and its answers at the current simulated time")
    show.add_argument("task_id", help="e.g. liveweb-cross-00042")
    show.add_argument("--hours", type=float, default=0.0, help="look this many simulated hours after the start")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    if args.liveweb_command == "serve":
        return _serve(args)
    if args.liveweb_command == "show":
        return _show(args)
    args.parser.print_help()
    return 2


def _serve(args: argparse.Namespace) -> int:
    from termgym.tasks.liveweb.server import Episode, WorldServer
    from termgym.tasks.liveweb.sites import SITES
    from termgym.tasks.liveweb.world import SimClock, World

    world = World(args.seed)
    episode = Episode(key="default", world=world, clock=SimClock(world.base_time, speed=args.speed))
    try:
        server = WorldServer(port=args.port, default=episode).start()
    except OSError as exc:
        print(f"termgym liveweb serve: cannot listen on 127.0.0.1:{args.port}: {exc}")
        return 1
    print(f"LIVEWEB world seed {args.seed} on http://127.0.0.1:{server.port} (speed {args.speed}x). Try:")
    for site in SITES.values():
        print(f"  curl -H 'Host: {site.host}' http://127.0.0.1:{server.port}/")
    print("Stop with Ctrl-C.")
    try:
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        server.stop()
    return 0


def _show(args: argparse.Namespace) -> int:
    from termgym.tasks.liveweb import LiveWebSuite

    suite = LiveWebSuite(speed=0, start="fixed")
    try:
        task = suite.load(args.task_id)
    except KeyError as exc:
        print(f"termgym liveweb show: {exc.args[0]}")
        return 2
    at = task.start_time() + args.hours * 3600
    answers = task.expected_answers(at=at)
    if args.json:
        print(json.dumps({"task_id": task.task_id, "sim_time": int(at), "instruction": task.instruction,
                          "answers": answers, "metadata": task.metadata}, indent=2))
        return 0
    print(task.instruction)
    print(f"\nAnswers at simulated time {int(at)} ({args.hours:g} h after the fixed start):")
    for qid, value in answers.items():
        print(f"  {qid}: {json.dumps(value)}")
    return 0
