#!/usr/bin/env python3
"""A stand-in command-line coding agent, run inside a termgym sandbox by the ``cli`` agent's tests.

Like the real ones (Codex, Claude Code…) it is a program that takes an instruction, talks to an
OpenAI-compatible chat endpoint over HTTP (``$OPENAI_BASE_URL``, ``$OPENAI_API_KEY``), runs the
shell commands the model asks for, feeds their output back, and stops when the model says it is
done. The model replies with JSON: ``{"command": "..."}`` or ``{"done": true}``. It logs each turn
as a JSON line to ``--log``. Standard library only (the sandbox has python3 but no packages).
"""

import argparse
import json
import os
import subprocess
import sys
import urllib.request


def chat(messages, model):
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps({"model": model, "messages": messages}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)["choices"][0]["message"]["content"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("instruction")
    parser.add_argument("--model", default="default")
    parser.add_argument("--log", default="/tmp/standin-agent.jsonl")
    parser.add_argument("--max-turns", type=int, default=20)
    args = parser.parse_args()
    messages = [{"role": "system", "content": 'Reply with JSON: {"command": "<shell command>"} or {"done": true}.'},
                {"role": "user", "content": args.instruction}]
    with open(args.log, "w") as log:
        for turn in range(args.max_turns):
            content = chat(messages, args.model)
            messages.append({"role": "assistant", "content": content})
            action = json.loads(content)
            if action.get("done"):
                log.write(json.dumps({"turn": turn, "done": True}) + "\n")
                print("standin-agent: done")
                return 0
            run = subprocess.run(action["command"], shell=True, capture_output=True, text=True, timeout=300)
            output = run.stdout + run.stderr
            log.write(json.dumps({"turn": turn, "command": action["command"], "exit_code": run.returncode,
                                  "output": output[-4000:]}) + "\n")
            log.flush()
            print(f"standin-agent: ran {action['command'][:60]!r} -> {run.returncode}")
            messages.append({"role": "user", "content": f"exit code {run.returncode}\n{output[-4000:]}"})
    print("standin-agent: out of turns", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
