"""Hook implementations of streaming-azure: storage azure, azure-dl."""

from __future__ import annotations
