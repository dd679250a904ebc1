"""Dockerfile variables as Docker expands them, for tasks termgym emulates on the base image:
``ENV PATH=/opt/app/bin:$PATH`` keeps the base image's PATH (it once became ``/opt/app/bin:``, and
``mkdir`` was "command not found"), ``ARG`` defaults apply but stay out of the environment."""

from __future__ import annotations

import pytest

from termgym.tasks.harbor import load_task
from termgym.tasks.harbor.dockerfile import expand, parse_dockerfile
from termgym.tasks.harbor.trial import run_trial


def test_expansion_follows_dockers_rules():
    env = {"PATH": "/usr/bin:/bin", "EMPTY": ""}
    assert expand("/opt/app/bin:$PATH", env) == "/opt/app/bin:/usr/bin:/bin"
    assert expand("${EMPTY:-fallback} ${PATH:+set} ${UNSET:+no}x", env) == "fallback set x"
    assert expand("\\$PATH stays", env) == "$PATH stays"


def test_env_lines_expand_against_the_base_environment(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM termgym/base:bookworm\nARG V=1.2\nENV A=\"x $V\" B='$A' C=${A}-y\n"
                          "ENV PATH /opt/bin:$PATH\nWORKDIR /srv/$V\n")
    info = parse_dockerfile(dockerfile, base_env={"PATH": "/usr/bin"})
    assert info.env == {"A": "x 1.2", "B": "$A", "C": "x 1.2-y", "PATH": "/opt/bin:/usr/bin"}
    assert info.workdir == "/srv/1.2" and info.local_ok


ENV_PATH_DOCKERFILE = """\
FROM termgym/base:bookworm
ARG TOOLS=/opt/app
ENV PATH=${TOOLS}/bin:$PATH GREETING="hello there"
WORKDIR /app
COPY hello /opt/app/bin/hello
"""
ENV_PATH_TEST = """\
#!/bin/bash
mkdir -p /tmp/check && [ "$(hello)" = "hello there" ] && grep -qx ok /app/done.txt && echo 1 > /logs/verifier/reward.txt \
  || echo 0 > /logs/verifier/reward.txt
"""


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_env_path_extends_the_base_images_path(make_task, write_file, backend, request):
    if backend == "local":
        request.getfixturevalue("local_backend")
    task_dir = make_task("env-path", dockerfile=ENV_PATH_DOCKERFILE, test_sh=ENV_PATH_TEST)
    write_file(task_dir / "environment" / "hello", "#!/bin/sh\necho \"$GREETING\"\n", executable=True)
    task = load_task(task_dir)
    assert task.local_ok  # ARG/ENV/WORKDIR/COPY: emulated, not built
    assert task.dockerfile.env["PATH"] == "/opt/app/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert "TOOLS" not in task.dockerfile.env  # an ARG is not in the environment
    oracle = run_trial(task, "oracle", backend=backend)
    assert oracle.error is None and oracle.score == 1.0, (oracle.error, oracle.grade)
    assert run_trial(load_task(task_dir), "nop", backend=backend).score == 0.0
