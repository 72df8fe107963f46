"""Tools: the CLI subcommands, conversion, simulation, Spark and trainer integrations."""
