"""Registry-free images: mirror discovery, Dockerfile base detection, cached builds, the CLI."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from termgym.sandbox import BackendUnavailable, SandboxSpec
from termgym.sandbox.images import (
    DEFAULT_BASE_IMAGE,
    base_recipe_hash,
    build_base_image,
    build_image,
    debian_mirror,
    dockerfile_bases,
    image_recipe,
    split_tag,
)


def test_mirror_from_deb822_sources(tmp_path, monkeypatch):
    monkeypatch.delenv("TERMGYM_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\nTypes: deb-src deb\nURIs: http://mirror.example/debian/\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert debian_mirror(apt_dir=tmp_path) == "http://mirror.example/debian"


def test_mirror_from_one_line_list_and_override(tmp_path, monkeypatch):
    monkeypatch.delenv("TERMGYM_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/x.gpg] http://one.example/debian bookworm main contrib\n"
    )
    assert debian_mirror(apt_dir=tmp_path) == "http://one.example/debian"
    monkeypatch.setenv("TERMGYM_DEBIAN_MIRROR", "http://override.example/debian/")
    assert debian_mirror(apt_dir=tmp_path) == "http://override.example/debian"


def test_mirror_falls_back_to_deb_debian_org(tmp_path, monkeypatch):
    monkeypatch.delenv("TERMGYM_DEBIAN_MIRROR", raising=False)
    assert debian_mirror(apt_dir=tmp_path) == "http://deb.debian.org/debian"


def test_dockerfile_bases_skip_stages_and_scratch_and_expand_args():
    text = (
        "ARG BASE=python:3.12-slim\n"
        "FROM --platform=linux/amd64 ${BASE} AS build\nRUN make\n"
        "FROM build AS test\n"
        "FROM scratch\n"
        "FROM \\\n  debian:bookworm\nCOPY --from=build /a /a\n"
    )
    assert dockerfile_bases(text) == ["python:3.12-slim", "debian:bookworm"]


def test_split_tag():
    assert split_tag("termgym/base:bookworm") == ("termgym/base", "bookworm")
    assert split_tag("localhost:5000/img") == ("localhost:5000/img", "latest")


def test_base_image_recipe_is_the_runtime_version():
    from termgym.sandbox.runtime import current_version

    assert base_recipe_hash() == current_version()


@pytest.mark.docker
def test_build_base_image_is_cached(docker):
    messages: list[str] = []
    image_id = build_base_image(log=messages.append)
    assert messages == [f"{DEFAULT_BASE_IMAGE} is up to date (recipe {base_recipe_hash()})"]
    assert image_id.startswith("sha256:")


@pytest.mark.docker
def test_base_image_has_what_tasks_need(docker):
    from termgym.sandbox.docker import DockerSandbox

    with DockerSandbox(SandboxSpec()) as sb:
        result = sb.exec("bash --version | head -1 && git --version && python3 -m pytest --version && "
                         "curl --version | head -1 && tmux -V && ps --version && ls /etc/ssl/certs | wc -l")
        assert result.exit_code == 0, result.output
        assert "pytest" in result.output and "tmux" in result.output


@pytest.mark.docker
def test_dockerfile_with_missing_base_names_it(docker, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM termgym/absent-base:7\nRUN true\n")
    with pytest.raises(BackendUnavailable) as err:
        build_image(tmp_path, tag="termgym/test-absent:1", log=lambda m: None)
    message = str(err.value)
    assert "termgym/absent-base:7" in message
    assert f"docker tag {DEFAULT_BASE_IMAGE} termgym/absent-base:7" in message
    assert "termgym images build-base" in message


@pytest.mark.docker
def test_dockerfile_with_local_base_builds_and_is_cached(docker, tmp_path):
    from termgym.sandbox.docker import DockerSandbox, get_client

    token = uuid.uuid4().hex[:8]
    (tmp_path / "hello.txt").write_text(f"hello {token}\n")
    (tmp_path / "Dockerfile").write_text(
        f"FROM {DEFAULT_BASE_IMAGE}\nCOPY hello.txt /opt/hello.txt\nRUN echo built > /opt/built\nWORKDIR /app\n"
    )
    tag = f"termgym/test-build-{token}:latest"
    client = get_client()
    try:
        assert build_image(tmp_path, tag=tag, log=lambda m: None) == tag
        assert image_recipe(client, tag)
        logs: list[str] = []
        build_image(tmp_path, tag=tag, log=logs.append)
        assert logs and "up to date" in logs[0]
        with DockerSandbox(SandboxSpec(image=tag, workdir="/app")) as sb:
            assert sb.exec("cat /opt/hello.txt /opt/built; pwd").output == f"hello {token}\nbuilt\n/app\n"
    finally:
        client.images.remove(tag, force=True)


@pytest.mark.docker
def test_images_cli_lists_the_base_image(docker):
    result = subprocess.run([sys.executable, "-m", "termgym.cli", "images", "list"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert DEFAULT_BASE_IMAGE in result.stdout and base_recipe_hash() in result.stdout


def test_build_cli_missing_context_is_an_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "termgym.cli", "images", "build", str(tmp_path / "nope")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "no Dockerfile" in result.stderr or "cannot reach" in result.stderr
