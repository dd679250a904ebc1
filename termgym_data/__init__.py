"""termgym's bundled data, kept apart from the code that reads it.

* ``swesynth/toy/`` — the small SWE-SYNTH projects written for termgym (ledgerly, planwise, textkit);
* ``swesynth/tasks/`` — the SWE-SYNTH task folders generated from them;
* ``harbor/samples/`` — example task folders in the Harbor and Terminal-Bench formats.

Nothing here is imported as code: task repositories that happen to be Python are data.
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
SWESYNTH_DIR = DATA_DIR / "swesynth"
HARBOR_SAMPLES_DIR = DATA_DIR / "harbor" / "samples"

__all__ = ["DATA_DIR", "HARBOR_SAMPLES_DIR", "SWESYNTH_DIR"]
