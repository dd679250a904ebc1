"""Fixtures for the trainer-adapter tests: the scripted model, the tiny Qwen-style tokenizer, the suite.

The adapters' own packages (``openpipe-art``, ``tinker``, ``tinker-cookbook``) are required; see
docs/integrations.md for the CI install line. In CI (``CI`` set to ``true``/``1``) nothing here may
skip: a skip — a missing package, no bubblewrap — is reported as a failure naming its reason, so a
broken install cannot pass as "skipped".
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (HERE, HERE.parent / "evaluate", ROOT):  # token_server, scripted_model, trainers/
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# LiteLLM (imported by ART) fetches a price list from GitHub at import; use its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# `import art` patches transformers' attention-mask helper for the transformers its GPU backend pins
# (5.2.0). With the newer transformers veRL brings (5.10), that patch breaks every model forward in
# the process, and this pytest process also runs the veRL tests: import art once here and put the
# original back (docs/integrations.md: keep ART's training in an environment of its own).
try:
    from transformers import masking_utils as _masking
except ImportError:
    _masking = None
if _masking is not None:
    _original_mask_arguments = _masking._preprocess_mask_arguments
    try:
        import art  # noqa: F401
    except ImportError:
        pass
    _masking._preprocess_mask_arguments = _original_mask_arguments


# In CI a skip here is a failure (see strict_skips.py): these hooks apply to this folder's tests.
from strict_skips import in_ci, pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402, F401

if shutil.which("bwrap") is None:
    if in_ci():
        raise RuntimeError("the integration tests need bubblewrap (apt-get install bubblewrap); CI must run them")
    pytest.skip("the integration tests need bubblewrap (apt-get install bubblewrap)", allow_module_level=True)


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from trainers.verl.tiny_model import build_tiny_tokenizer

    return build_tiny_tokenizer()
