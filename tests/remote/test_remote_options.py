"""The ``ray`` env option and the env-to-actor channel, without a cluster."""

from __future__ import annotations

import socket
import time

import gymnasium as gym
import pytest

import termgym
from termgym.registration import termgym_env_ids
from termgym.remote import RayEnv, ray_options
from termgym.remote.channel import TOKEN_BYTES, connect, recv_frame, send_frame, serve


def test_the_ray_option_makes_a_ray_env_and_starts_nothing_until_reset():
    env = gym.make("termgym/SweSynth-v0", path="toy", ray={"resources": {"termgym_sandbox": 2}, "num_cpus": 0.5})
    base = env.unwrapped
    assert isinstance(base, RayEnv) and isinstance(base, termgym.TerminalEnv)
    assert base.ray_options["resources"] == {"termgym_sandbox": 2} and base.ray_options["num_cpus"] == 0.5
    assert base.remote_node is None and base._actor is None  # no actor, no Ray connection yet
    assert len(env.get_wrapper_attr("suite").task_ids()) > 0  # the suite is here too (eval lists tasks from it)
    with pytest.raises(RuntimeError, match="call reset"):  # as TerminalEnv says it, under gym's wrappers too
        base.step("THOUGHT: x\n\n```bash\nls\n```")
    env.close()
    for off in (None, False):
        plain = gym.make("termgym/SweSynth-v0", path="toy", ray=off)
        assert type(plain.unwrapped) is termgym.TerminalEnv
        plain.close()
    assert "termgym/SweSynth-v0" in termgym_env_ids()


def test_ray_options_fill_defaults_and_name_what_is_wrong():
    assert ray_options(True)["resources"] == {"termgym_sandbox": 1} and ray_options(True)["num_cpus"] == 0
    with pytest.raises(TypeError, match=r"unknown ray option\(s\) 'resource'; known: resources"):
        ray_options({"resource": {"termgym_sandbox": 1}})
    with pytest.raises(ValueError, match="ray resources must map names to positive amounts"):
        ray_options({"resources": {"termgym_sandbox": 0}})
    with pytest.raises(ValueError, match="start_timeout must be positive"):
        ray_options({"start_timeout": -1})
    with pytest.raises(TypeError, match="the ray option is True or a dict"):
        gym.make("termgym/SweSynth-v0", path="toy", ray="yes")


def _echo_server():
    calls = []

    def handle(method, args):
        calls.append((method, args))
        if args == ("boom",):
            raise KeyError("no such task 'boom'")
        return args

    return serve("127.0.0.1", handle, frozenset({"step"})), calls


def test_the_channel_serves_the_token_holder_and_returns_the_env_s_own_exceptions():
    (host, port, token), calls = _echo_server()
    assert len(token) == TOKEN_BYTES
    with connect(host, port, token) as sock:
        send_frame(sock, ("step", ("hi",)))
        assert recv_frame(sock) == ("ok", ("hi",))
        send_frame(sock, ("step", ("boom",)))
        status, exc = recv_frame(sock)
        assert status == "error" and isinstance(exc, KeyError) and "boom" in str(exc)
        send_frame(sock, ("close", ()))  # not a channel method: refused, nothing called
        status, exc = recv_frame(sock)
        assert status == "error" and "not 'close'" in str(exc)
    assert calls == [("step", ("hi",)), ("step", ("boom",))]


def test_the_channel_ignores_a_client_without_the_token_and_still_serves_the_owner():
    (host, port, token), calls = _echo_server()
    with socket.create_connection((host, port)) as stranger:
        stranger.sendall(b"x" * TOKEN_BYTES)
        send_frame(stranger, ("step", ("intruder",)))
        stranger.settimeout(5)
        try:
            assert stranger.recv(1) == b""  # hung up on, never served
        except ConnectionResetError:
            pass  # hung up on with the request unread
    with connect(host, port, token) as sock:
        send_frame(sock, ("step", ("owner",)))
        assert recv_frame(sock) == ("ok", ("owner",))
    time.sleep(0.1)
    assert calls == [("step", ("owner",))]
