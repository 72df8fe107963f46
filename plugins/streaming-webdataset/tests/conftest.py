"""streaming-webdataset tests: make the shared data helpers (``wds_data``) importable under importlib mode."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
