"""One module per engine, each exporting ``SPEC`` (``crossover.engines.spec.EngineSpec``);
``crossover.engines.registry`` lists them."""
