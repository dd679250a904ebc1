"""Just enough Dockerfile reading to know a task's WORKDIR and whether it runs on the local backend.

A task is **local-eligible** when its image adds nothing the host does not provide: the Dockerfile
is a single ``FROM termgym/base[:tag]`` stage followed only by ``WORKDIR``, ``ENV``, ``ARG``,
plain ``COPY`` of files from the build context, and instructions that do not change the filesystem
(``LABEL``, ``CMD``, ``ENTRYPOINT``, ``EXPOSE``, ``MAINTAINER``, ``STOPSIGNAL``, ``HEALTHCHECK``,
``SHELL``, ``USER root``). Anything else (``RUN``, ``ADD``, ``COPY --from``, another base image,
several stages, a non-root ``USER``) needs the Docker backend. :func:`local_blocker` says which
line decided.

Variables expand as Docker's builder expands them: ``$VAR``, ``${VAR}``, ``${VAR:-word}`` and
``${VAR:+word}``, against the base image's own environment (``ENV PATH=/opt/app/bin:$PATH`` keeps the
base image's ``PATH`` behind the new entry), the ``ARG`` values (defaults; not kept in the
environment) and the ``ENV`` lines before.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

#: The image termgym builds locally (``termgym images build-base``); the only local-eligible base.
BASE_IMAGE_REPO = "termgym/base"
_NEUTRAL = {"LABEL", "CMD", "ENTRYPOINT", "EXPOSE", "MAINTAINER", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "VOLUME"}


@dataclass
class Instruction:
    """One Dockerfile instruction: its keyword, raw argument text and 1-based starting line."""

    keyword: str
    args: str
    line: int


@dataclass
class Copy:
    """A resolved ``COPY``: host paths in the build context to one sandbox destination."""

    sources: list[Path]
    dest: str  # absolute; a directory when it ends with "/" or there are several sources


@dataclass
class DockerfileInfo:
    """What termgym learns from a Dockerfile."""

    path: Path
    base_image: str | None = None
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    copies: list[Copy] = field(default_factory=list)
    blocker: str | None = None  # why the task needs Docker; None when local-eligible
    #: The base image's environment the variables were expanded against.
    base_env: dict[str, str] = field(default_factory=dict)
    #: ``ARG`` values in scope after the last line (build-time only: not in the sandbox's environment).
    args: dict[str, str] = field(default_factory=dict)

    @property
    def local_ok(self) -> bool:
        return self.blocker is None


def read_instructions(text: str) -> list[Instruction]:
    """Split a Dockerfile into instructions, joining ``\\`` continuations and dropping comments."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):  # comments inside a continuation are dropped
            continue
        if not buf:
            start = number
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        joined = " ".join(part.strip() for part in buf).strip()
        buf = []
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    if buf:
        joined = " ".join(part.strip() for part in buf).strip()
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    return out


_VAR = re.compile(r"\\\$|\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def _base_environment() -> dict[str, str]:
    """The environment termgym's base image is imported with (its ``ENV`` changes)."""
    from termgym.sandbox.images import BASE_CHANGES

    env: dict[str, str] = {}
    for change in BASE_CHANGES:
        keyword, _, rest = change.partition(" ")
        if keyword == "ENV":
            key, _, value = rest.partition("=")
            env[key] = value
    return env


def expand(text: str, env: dict[str, str]) -> str:
    """Docker's variable substitution: ``$V``, ``${V}``, ``${V:-default}``, ``${V:+alternative}``, ``\\$``."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "\\$":
            return "$"
        name = match.group(1) or match.group(4)
        value = env.get(name)
        if match.group(2) == "-":
            return value if value else expand(match.group(3), env)
        if match.group(2) == "+":
            return expand(match.group(3), env) if value else ""
        return value or ""

    return _VAR.sub(sub, text)


_expand = expand


def _words(args: str) -> list[str]:
    """Arguments in JSON-array form (``["a", "b"]``) or shell-word form."""
    stripped = args.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return value
        except json.JSONDecodeError:
            pass
    return shlex.split(stripped)


def _parse_env(args: str, env: dict[str, str]) -> dict[str, str]:
    # Expand before splitting into words, on the raw text, as Docker does: quotes protect spaces
    # in the expanded value, and a single-quoted word is not expanded.
    if "=" not in args.strip().split(None, 1)[0]:  # legacy form: ENV KEY value with spaces
        key, _, value = args.strip().partition(" ")
        return {key: _expand(value.strip().strip('"'), env)}
    out: dict[str, str] = {}
    for word in re.findall(r"""(?:[^\s"']|"(?:\\.|[^"])*"|'[^']*')+""", args):
        key, _, value = word.partition("=")
        # Single quotes keep their text literal; double quotes and bare text are expanded.
        pieces = []
        for part in re.finditer(r"""'(?P<single>[^']*)'|"(?P<double>(?:\\.|[^"])*)"|(?P<bare>[^'"]+)""", value):
            if part.group("single") is not None:
                pieces.append(part.group("single"))
            else:
                pieces.append(_expand(part.group("double") or part.group("bare") or "", {**env, **out}))
        out[key] = "".join(pieces)
    return out


def parse_dockerfile(path: Path, base_env: dict[str, str] | None = None) -> DockerfileInfo:
    """Read ``path`` (in its build context directory) and decide local eligibility.

    ``base_env`` is the FROM image's environment (default: termgym's base image's); ``info.env``
    holds only what the Dockerfile's ``ENV`` lines set, already expanded against it.
    """
    info = DockerfileInfo(path=path, base_env=dict(_base_environment() if base_env is None else base_env))
    context = path.parent
    stages = 0

    def scope() -> dict[str, str]:
        # What $VAR means on a line: ARG values, then the image's environment over them.
        return {**info.args, **info.base_env, **info.env}

    def block(ins: Instruction, why: str) -> None:
        if info.blocker is None:
            info.blocker = f"{path.name} line {ins.line}: {ins.keyword} {ins.args[:60]} ({why})"

    for ins in read_instructions(path.read_text(encoding="utf-8")):
        kw = ins.keyword
        if kw == "FROM":
            stages += 1
            words = [w for w in ins.args.split() if not w.startswith("--")]
            image = words[0] if words else ""
            if stages == 1:
                info.base_image = image
                repo = image.rsplit("@", 1)[0]
                repo = repo.rsplit(":", 1)[0] if ":" in repo.rsplit("/", 1)[-1] else repo
                if repo != BASE_IMAGE_REPO:
                    block(ins, f"the local backend only provides {BASE_IMAGE_REPO}")
            else:
                block(ins, "multi-stage build")
        elif kw == "WORKDIR":
            target = _expand(_words(ins.args)[0] if ins.args else "/", scope())
            info.workdir = posixpath.normpath(posixpath.join(info.workdir, target))
        elif kw == "ENV":
            info.env.update(_parse_env(ins.args, scope()))
        elif kw == "ARG":
            if stages == 0:
                continue  # an ARG before FROM only parameterises FROM (dockerfile_bases reads it)
            for word in shlex.split(ins.args):
                key, sep, default = word.partition("=")
                # A build has no --build-arg here: the default (or empty) is the value.
                info.args.setdefault(key, _expand(default, scope()) if sep else "")
        elif kw == "COPY":
            words = _words(ins.args)
            flags = [w for w in words if w.startswith("--")]
            words = [w for w in words if not w.startswith("--")]
            if any(f.startswith("--from") for f in flags):
                block(ins, "copies from another image")
                continue
            if len(words) < 2:
                block(ins, "COPY needs a source and a destination")
                continue
            copy = _resolve_copy(context, [_expand(w, scope()) for w in words[:-1]],
                                 _expand(words[-1], scope()), info.workdir)
            if isinstance(copy, str):
                block(ins, copy)
            else:
                info.copies.append(copy)
        elif kw == "USER":
            if _words(ins.args)[0].split(":")[0] not in ("root", "0"):
                block(ins, "runs as another user")
        elif kw in _NEUTRAL:
            continue
        else:  # RUN, ADD, ONBUILD, anything unknown: it changes the image
            block(ins, "changes the image")
    if stages == 0:
        info.blocker = f"{path.name}: no FROM instruction"
    return info


def _resolve_copy(context: Path, sources: list[str], dest: str, workdir: str) -> Copy | str:
    """Resolve COPY sources in the build context; a string return says why it cannot be emulated."""
    resolved: list[Path] = []
    root = context.resolve()
    for src in sources:
        matches = sorted(glob.glob(str(context / src))) if any(c in src for c in "*?[") else [str(context / src)]
        if not matches:
            return f"source {src!r} does not exist in {context}"
        for match in matches:
            p = Path(match)
            if not p.exists():
                return f"source {src!r} does not exist in {context}"
            if not str(p.resolve()).startswith(str(root)):
                return f"source {src!r} is outside the build context"
            resolved.append(p)
    absolute = posixpath.normpath(posixpath.join(workdir, dest))
    if dest.endswith("/") or len(resolved) > 1 or dest in (".", "./"):
        absolute = absolute.rstrip("/") + "/"
    return Copy(sources=resolved, dest=absolute)


def executable_files(paths: list[Path]) -> list[Path]:
    """The files under ``paths`` (files or directories) that have an executable bit set."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            for dirpath, _dirs, files in os.walk(p):
                out += [Path(dirpath) / f for f in files if os.access(Path(dirpath) / f, os.X_OK)]
        elif os.access(p, os.X_OK):
            out.append(p)
    return out
