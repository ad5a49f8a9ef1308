"""`actormq console`: a web console, Prometheus metrics and message traces of a RocketMQ 4.x
cluster (issue #24)."""
