"""Every setting of a measurement, declared once.

The parts (``workload``, ``load``, ``limits``, ``target``) each declare their own keys;
``run.RunConfig`` (``crossover run``), ``sweep.SweepConfig`` (``crossover sweep``) and
``capacity.CapacityConfig`` (``crossover capacity``) are built from them, so a key
means the same thing, with the same bounds and the same refusals, wherever it is given.
Files keep their flat keys (``output_tokens:`` at the top of a sweep YAML): the parts are
base classes, not nested blocks. A sweep level's and a capacity level's run is made by
one constructor, ``run.level_run``, which copies every workload and limits key by name.
``slo`` is the one SLO type (terms such as ``ttft_ms.p99<=500``) that run, sweep,
capacity and decide hold.
"""
