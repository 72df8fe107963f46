"""The py1 shuffle family (py1e, py1b, py1br, py1s, py2s) and the node-local py1n for streaming-core."""
