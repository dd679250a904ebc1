"""termgym's tinker-cookbook recipe: :mod:`trainers.tinker.train` (seed 002 as a cookbook RL config)."""
