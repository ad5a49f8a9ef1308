"""The SparkBridge: plans Spark partitions of RocketMQ topics (pure cores + one thin actor)."""
