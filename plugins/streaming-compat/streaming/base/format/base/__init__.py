"""``streaming.base.format.base``: the reference's module path of the writer base classes."""
