"""Engines built from pinned source and cached under ``~/.cache/crossover``.

``crossover.builds.llamacpp`` fetches the llama.cpp tree vendored in a pinned
``llama-cpp-python`` sdist and builds ``llama-server`` once per (source, flags).
"""
