"""End to end: `evaluate` with the openai agent against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import socket
import time

import pytest

from termgym.evaluation import evaluate

# Short enough to keep the test quick, long enough that a loaded CI machine does not time out a
# healthy request (the scripted stall is 5 s).
FAST = {"timeout": 2.0, "max_retries": 2, "backoff": 0.05, "max_backoff": 0.1}


def _by_task(outcome):
    return {r.task_id: r for r in outcome.results}


def test_results_match_the_script_and_failures_are_classified(tmp_path, scripted_server, scripted):
    started = time.monotonic()
    outcome = evaluate(scripted.ENV_ID, agent="openai", output_dir=tmp_path / "run", concurrency=6,
                       agent_options={**FAST, "base_url": scripted_server.base_url, "model": "scripted-1",
                                      "logprobs": True, "return_token_ids": True},
                       infra_retries=1, infra_backoff=0.05, progress=False)
    elapsed = time.monotonic() - started
    results = _by_task(outcome)
    assert set(results) == set(scripted.EXPECTED)
    for task_id, (status, passed, end_reason) in scripted.EXPECTED.items():
        r = results[task_id]
        assert (r.status, r.passed, r.end_reason) == (status, passed, end_reason), (task_id, r.error)
        assert r.score == (1.0 if passed else 0.0)

    # Format errors are the agent's, counted per step; the episode goes on.
    assert results["bad-format"].format_errors == 2 and results["bad-format"].steps == 4
    assert results["never-formats"].format_errors == scripted.MAX_STEPS
    # Transient endpoint failures were retried inside the request: the episode never noticed.
    for task_id in ("flaky-500", "slow-once", "drop-once"):
        assert outcome.run_dir.transcript(results[task_id])["turns"][0]["meta"]["retries"] >= 1, task_id
        assert results[task_id].infra_failures == []
    # Persistent failures: infrastructure, retried as whole episodes, and the reason kept.
    down = results["down"]
    assert down.error["kind"] == "infra" and down.error["type"] == "EndpointError"
    assert "HTTP 500" in down.error["message"] and len(down.infra_failures) == 1
    assert "no complete response" in results["hang"].error["message"] or "timed out" in results["hang"].error["message"]
    too_long = results["too-long"]
    assert too_long.error["kind"] == "agent" and too_long.error["type"] == "EndpointRejected"
    assert "maximum context length" in too_long.error["message"] and too_long.infra_failures == []

    # Usage, logprobs and token ids are recorded per turn and summed per episode.
    right_turns = outcome.run_dir.transcript(results["right-1"])["turns"]
    turn = right_turns[0]
    assert turn["usage"]["completion_tokens"] == len(turn["logprobs"]) == len(turn["token_ids"])
    assert turn["prompt_token_ids"] and turn["meta"]["finish_reason"] == "stop"
    assert results["right-1"].completion_tokens == sum(t["usage"]["completion_tokens"] for t in right_turns)
    # The transcript, read from the episode's record, has the whole conversation and the command results.
    messages = outcome.run_dir.transcript(results["explore"])["messages"]
    assert messages[0]["role"] == "system" and "[task:explore]" in messages[1]["content"]
    assert "<returncode>0</returncode>" in messages[3]["content"] and "/workspace" in messages[3]["content"]

    s = outcome.summary
    assert (s["episodes"], s["completed"], s["agent_errors"], s["infra_errors"]) == (13, 10, 1, 2)
    assert s["scored"] == 11 and s["solved"] == 8 and s["solve_rate"] == pytest.approx(8 / 11)
    assert s["pass_at_k"] == {"1": pytest.approx(8 / 11)}
    # Nothing hangs: the stalls are bounded by the request timeout and the retries.
    assert elapsed < 60, elapsed
    # The files on disk are the results.
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["solved"] == 8 and (tmp_path / "run" / "episodes" / "right-1__a0.json").exists()


def test_request_carries_model_parameters_and_key(tmp_path, scripted_server, scripted, monkeypatch):
    monkeypatch.setenv("MY_TEST_KEY", "sk-test-123")
    evaluate(scripted.ENV_ID, agent="openai", output_dir=tmp_path / "run", task_ids="right-1",
             agent_options={**FAST, "base_url": scripted_server.base_url, "api_key_env": "MY_TEST_KEY",
                            "temperature": 0.7, "max_tokens": 256, "extra_body": {"top_k": 20}},
             progress=False)
    request = scripted_server.requests[0]
    assert request["authorization"] == "Bearer sk-test-123"
    body = request["body"]
    # No --model: the agent asked /v1/models and took the first one.
    assert body["model"] == "scripted-1"
    assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.7, 256, 20)
    assert "tools" not in body and "logprobs" not in body
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert "sk-test-123" not in json.dumps(config)


def test_toolcall_protocol_sends_tools_and_plays_tool_calls(tmp_path, scripted_server, scripted):
    outcome = evaluate(scripted.ENV_ID, agent="openai", output_dir=tmp_path / "run", protocol="toolcall",
                       task_ids="right-1,explore,wrong-answer,bad-format",
                       agent_options={**FAST, "base_url": scripted_server.base_url, "model": "m"}, progress=False)
    results = _by_task(outcome)
    assert {t: (r.status, r.passed) for t, r in results.items()} == {
        "right-1": ("completed", True), "explore": ("completed", True),
        "wrong-answer": ("completed", False), "bad-format": ("completed", True)}
    assert results["bad-format"].format_errors == 2
    body = scripted_server.requests[-1]["body"]
    assert [t["function"]["name"] for t in body["tools"]] == ["bash", "submit"]
    # Tool results go back as tool messages bound to the call id.
    tool_messages = [m for m in outcome.run_dir.transcript(results["explore"])["messages"]
                     if m["role"] == "tool"]
    assert tool_messages and all(m["tool_call_id"].startswith("call_") for m in tool_messages)
    assert any(m.get("tool_calls") for m in body["messages"])


def test_unreachable_endpoint_is_an_infra_error_for_each_episode(tmp_path, scripted):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    outcome = evaluate(scripted.ENV_ID, agent="openai", output_dir=tmp_path / "run", task_ids="right-1,right-2",
                       agent_options={**FAST, "base_url": f"http://127.0.0.1:{port}/v1", "model": "m"},
                       infra_retries=1, infra_backoff=0.01, progress=False)
    assert time.monotonic() - started < 20
    assert [r.status for r in outcome.results] == ["infra_error", "infra_error"]
    assert all("cannot reach" in r.error["message"] for r in outcome.results)
    assert outcome.summary["scored"] == 0 and outcome.summary["solve_rate"] is None


def test_wrong_key_is_not_retried(tmp_path, scripted):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits = []

    class Unauthorized(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            hits.append(self.path)
            raw = b'{"error": {"message": "invalid api key"}}'
            self.send_response(401)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Unauthorized)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        outcome = evaluate(scripted.ENV_ID, agent="openai", output_dir=tmp_path / "run", task_ids="right-1",
                           agent_options={**FAST, "base_url": f"http://127.0.0.1:{httpd.server_address[1]}/v1",
                                          "model": "m"}, infra_retries=3, infra_backoff=0.01, progress=False)
    finally:
        httpd.shutdown()
        httpd.server_close()
    (result,) = outcome.results
    assert result.status == "infra_error" and not result.error["retriable"]
    assert "HTTP 401" in result.error["message"] and "API key" in result.error["message"]
    assert len(hits) == 1  # neither the request nor the episode was retried
