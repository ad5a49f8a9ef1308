"""RocketMQ's plain ACL on the broker: plain_acl.yml's accounts and the check of each request
(acl/plain of RocketMQ 4.9.x)."""
