"""Reading: streams, indexes (JSON, binary, derived), the shard catalogue, shard access and the cache,
iteration, the datasets and the DataLoader."""
