"""An example third-party plugin for streaming-core (see docs/plugins/writing.md)."""
