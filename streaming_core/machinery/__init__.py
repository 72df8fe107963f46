"""Plugin machinery: the plugin host, its manifest, discovery, the name registries and the Protocols."""
