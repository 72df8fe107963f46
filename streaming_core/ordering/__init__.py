"""Ordering: the world shape, the order configuration, epoch planning, partitions and stream sampling."""
