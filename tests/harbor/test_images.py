"""Images as Harbor uses them: a prebuilt ``docker_image`` is pulled (from a real registry on
loopback, Debian's ``docker-registry``), ``force_build`` builds the Dockerfile instead, a failed pull
falls back to the Dockerfile or is named, and a changed base image rebuilds what was built on it."""

from __future__ import annotations

import io
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.request
import uuid

import pytest

from termgym.cli import main
from termgym.sandbox.base import BackendUnavailable
from termgym.tasks.harbor import load_task
from termgym.tasks.harbor.trial import run_trial

pytestmark = pytest.mark.docker
BASE = "termgym/base:bookworm"


@pytest.fixture(scope="module")
def client():
    from termgym.sandbox.images import docker_client

    client = docker_client()
    try:
        client.images.get(BASE)
    except Exception:
        pytest.fail(f"the {BASE} image is missing: termgym images build-base")
    return client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A Docker registry (Debian's docker-registry) on a loopback port; yields ``127.0.0.1:PORT``."""
    program = shutil.which("docker-registry")
    if program is None:
        pytest.fail("docker-registry is not installed (apt-get install docker-registry; scripts/setup.sh --all)")
    root = tmp_path_factory.mktemp("registry")
    port = _free_port()
    config = root / "config.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([program, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("docker-registry did not start")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def _image(client, tag, files: dict[str, str], base=BASE, workdir="/srv/app"):
    """Build ``tag`` from ``base`` plus ``files`` (a real docker build) and return its id."""
    dockerfile = f"FROM {base}\nWORKDIR {workdir}\n" + "".join(f"COPY {n} /{n}\n" for n in files)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in {"Dockerfile": dockerfile, **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    image, _ = client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True, pull=False)
    return image.id


@pytest.fixture
def cleanup(client):
    tags: list[str] = []
    yield tags
    for tag in tags:
        try:
            client.images.remove(tag, force=True)
        except Exception:
            pass


def test_a_prebuilt_image_is_pulled_from_the_registry_and_runs_unmodified(client, registry, make_task, cleanup):
    name = f"{registry}/termgym-test/prebuilt-{uuid.uuid4().hex[:8]}:1"
    cleanup.append(name)
    _image(client, name, {"marker": "from the registry\n"})
    for line in client.images.push(name, stream=True, decode=True):
        assert "error" not in line, line
    client.images.remove(name)  # gone from the host: the task must pull it
    task_dir = make_task("prebuilt", dockerfile=None,
                         toml=f'schema_version = "1.1"\n[environment]\ndocker_image = "{name}"\n',
                         test_sh="#!/bin/bash\nif [ \"$(pwd)\" = /srv/app ] && grep -q registry /marker && "
                                 "grep -qx ok /srv/app/done.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
                         solve_sh="#!/bin/bash\necho ok > done.txt\n")
    oracle = run_trial(load_task(task_dir), "oracle", backend="docker")
    assert oracle.error is None and oracle.score == 1.0, (oracle.error, oracle.grade)
    assert client.images.get(name)  # pulled
    nop = run_trial(load_task(task_dir), "nop", backend="docker")
    assert nop.score == 0.0


def test_an_image_that_cannot_be_pulled_is_named_or_falls_back_to_the_dockerfile(client, registry, make_task,
                                                                                 cleanup):
    missing = f"{registry}/termgym-test/never-pushed:{uuid.uuid4().hex[:8]}"
    task_dir = make_task("no-dockerfile", dockerfile=None,
                         toml=f'schema_version = "1.1"\n[environment]\ndocker_image = "{missing}"\n')
    task = load_task(task_dir)
    with pytest.raises(BackendUnavailable) as excinfo:
        task.sandbox_spec()
    message = str(excinfo.value)
    assert "'no-dockerfile'" in message and missing in message and "task.toml" in message
    assert "docker pull" in message and "no environment/Dockerfile" in message
    # With a Dockerfile, a failed pull falls back to building it, as `harbor run` without a prebuilt image.
    both = make_task("with-dockerfile", dockerfile="FROM termgym/base:bookworm\nWORKDIR /app\nRUN echo built > /b\n",
                     toml=f'schema_version = "1.1"\n[environment]\ndocker_image = "{missing}"\n')
    cleanup.append("termgym/harbor-with-dockerfile:latest")
    task = load_task(both)
    oracle = run_trial(task, "oracle", backend="docker")
    assert oracle.score == 1.0, (oracle.error, oracle.grade)
    assert missing in task.metadata["image_pull_failed"]
    # A Dockerfile termgym emulates on the base image: its WORKDIR and ENV hold after the fallback.
    emulated = make_task("emulated", dockerfile="FROM termgym/base:bookworm\nWORKDIR /srv/work\nENV MARK=emulated\n",
                         toml=f'schema_version = "1.1"\n[environment]\ndocker_image = "{missing}"\n',
                         test_sh='#!/bin/bash\n[ "$(pwd)" = /srv/work ] && [ "$MARK" = emulated ] && echo 1 > '
                                 '/logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n')
    nop = run_trial(load_task(emulated), "nop", backend="docker")
    assert nop.score == 1.0, (nop.error, nop.grade)


def test_force_build_builds_the_dockerfile_even_when_the_image_exists(client, make_task, cleanup):
    prebuilt = f"termgym-test/prebuilt-local:{uuid.uuid4().hex[:8]}"
    cleanup += [prebuilt, "termgym/harbor-forced:latest"]
    _image(client, prebuilt, {"marker": "prebuilt\n"}, workdir="/app")
    task_dir = make_task("forced", dockerfile="FROM termgym/base:bookworm\nWORKDIR /app\nRUN echo built > /marker\n",
                         toml=f'schema_version = "1.1"\n[environment]\ndocker_image = "{prebuilt}"\n',
                         test_sh="#!/bin/bash\ngrep -qx {word} /marker && echo 1 > /logs/verifier/reward.txt || "
                                 "echo 0 > /logs/verifier/reward.txt\n".replace("{word}", "built"))
    plain = load_task(task_dir)
    assert plain.image() == prebuilt and run_trial(plain, "nop", backend="docker").score == 0.0
    forced = load_task(task_dir)
    forced.configure_run(force_build=True)
    assert forced.image() == "termgym/harbor-forced:latest"
    assert run_trial(forced, "nop", backend="docker").score == 1.0  # /marker came from the Dockerfile's RUN


def test_a_changed_base_image_rebuilds_the_task_image(client, tmp_path, cleanup):
    from termgym.sandbox.images import build_image

    base = f"termgym-test/stale-base:{uuid.uuid4().hex[:8]}"
    tag = f"termgym-test/stale-task:{uuid.uuid4().hex[:8]}"
    cleanup += [tag, base]
    _image(client, base, {"marker": "v1\n"})
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {base}\nRUN cp /marker /copied\n")
    build_image(context, tag=tag, client=client, log=lambda _l: None)
    first = client.images.get(tag).id
    build_image(context, tag=tag, client=client, log=lambda _l: None)
    assert client.images.get(tag).id == first  # unchanged base and context: reused
    _image(client, base, {"marker": "v2\n"})  # the base changes under the same tag
    build_image(context, tag=tag, client=client, log=lambda _l: None)
    assert client.images.get(tag).id != first
    out = client.containers.run(tag, ["cat", "/copied"], remove=True, network_mode="none")
    assert out.decode().strip() == "v2"


def test_list_check_reports_a_task_that_cannot_start(make_task, capsys):
    make_task("fine")
    make_task("no-path", dockerfile="FROM termgym/base:bookworm\nENV PATH=/nowhere\nWORKDIR /app\n")
    code = main(["harbor", "list", str(make_task("x").parent), "--check", "--backend", "docker"])
    out = capsys.readouterr().out
    assert code == 1 and "cannot start" in out and "1 cannot start" in out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("no-path"))
    assert "cannot start" in lines[at + 1]
