"""A real Flink job in the loop: the embedded load job, its REST and Prometheus metrics as
telemetry-contract records, and parallelism overrides rendered from a published plan."""
