"""Library notices that are not the user's business stay out of our CLI and pipeline output.

transformers logs a "LOAD REPORT … MISSING" table whenever a model is built before its trained weights are
loaded into it (our planner, reranker and encoder loaders do exactly that), and other advice meant for library
developers; only its errors are shown. Our own messages, warnings and progress bars are unaffected.
"""

from __future__ import annotations

import os
import sys


def quiet_libraries() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # read when transformers is first imported
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.set_verbosity_error()
