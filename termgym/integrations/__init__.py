"""Adapters that let other trainers drive termgym environments.

* :mod:`termgym.integrations.art` — OpenPipe ART: one episode → ``art.Trajectory``, N episodes of a
  task → ``art.TrajectoryGroup`` (install ``termgym[art]``);
* :mod:`termgym.integrations.tinker` — tinker-cookbook: token-level ``Env``/``EnvGroupBuilder``/
  ``RLDataset`` over termgym envs (install ``termgym[tinker]``);
* :mod:`termgym.integrations.episodes` — what both share: building the env, turning an episode's
  last ``info`` into flat numeric metrics.

Nothing here is imported by ``import termgym``; each adapter imports its trainer package when
it is imported itself.
"""
