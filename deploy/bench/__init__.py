"""The benchmarks `actormq bench` runs (broker, `--client`, `--consumer`, `--bound`).

Mirrors nothing in RocketMQ (its benchmark tools are `actormq producer` / `consumer`:
deploy.benchmark_producer, deploy.benchmark_consumer). They ship in the package so the command
works from an installed wheel; the benches nobody runs through the CLI stay in tests/bench.
"""
