"""Helpers every wing shares: parsing the values users give as arguments, and where node-local files live."""
