"""Calibration server: a fast OpenAI-compatible fake engine with a latency model and faults.

Users rehearse a sweep without a GPU and measure the client's own overhead against it;
the project's integration tests use it as their server. ``crossover.calibration.server``
holds the public API (``CalibrationConfig``, ``build_app``, ``serve``, ``spawn``).
Nothing heavy is imported here.
"""
