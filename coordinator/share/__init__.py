"""Kafka's share groups (KIP-932): membership and assignment on the group coordinator's shards
(beside coordinator/group/, same shard, ownership and log), and the state of one share-partition
(acquisition locks, delivery counts, acknowledgements) kept on a managed-log cursor by the
partition's owner."""
