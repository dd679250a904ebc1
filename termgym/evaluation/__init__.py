"""The evaluation harness behind ``termgym eval``, ``termgym compare`` and ``termgym view``.

:mod:`termgym.evaluation` is the public entry point (``evaluate``, ``compare_models``…); the
modules here are its parts: ``api`` (those entry points), ``selection`` (which tasks), ``episode`` (playing one episode and
classifying failures), ``config`` (what a run is asked to do), ``runner`` (many episodes concurrently, resumable), ``ray_runner`` (the same
over a Ray cluster), ``results`` (the run directory, summaries, pass@k), ``compare`` (runs side by
side with a paired bootstrap) and ``report`` (the static HTML report).
"""

from termgym.evaluation.api import *  # noqa: F403  (the public entry points)
from termgym.evaluation.api import __all__  # noqa: F401
