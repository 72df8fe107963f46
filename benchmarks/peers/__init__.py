"""Per-library runners for the iteration, access and cold-cache benchmarks.

Every measurement runs in a fresh subprocess started with the right virtualenv's interpreter::

    .venv/bin/python     benchmarks/peers/runner.py '<json spec>'   # streaming-core ("ours") and the floor
    .venv-ref/bin/python benchmarks/peers/runner.py '<json spec>'   # mosaicml-streaming, litdata, webdataset

``runner.py`` imports only numpy, torch and the library it measures (the modules ``impl_<name>.py`` of this
directory), prints one JSON line with its result, and never imports another library. ``driver.py`` is the
orchestrating side (run in ``.venv``): it prepares the identical data, launches runners and formats tables.
"""
