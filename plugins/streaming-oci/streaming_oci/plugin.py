"""Hook implementations of streaming-oci: storage oci."""

from __future__ import annotations
