"""termgym's OpenPipe ART recipe: :mod:`trainers.art.train` (seed 004's loop, seed 000's settings)."""
