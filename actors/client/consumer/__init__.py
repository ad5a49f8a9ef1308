"""The consumer side of the client: DefaultMQPushConsumer / DefaultLitePullConsumer and their parts.

Mirrors client/impl/consumer and client/consumer of RocketMQ 4.9.x: allocation strategies,
ProcessQueue, RebalanceImpl, PullAPIWrapper, PullMessageService, the concurrent and orderly
consume services and the offset stores, each a pure core in its own module.
"""
