"""RocketMQ's plain ACL (the rocketmq-acl module of RocketMQ 4.9.x): plain_acl.yml's accounts
and the check of each request, used by the broker's processors, its ACL admin codes and the
name server's write codes."""
