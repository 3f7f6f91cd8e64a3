"""NATS JetStream as the change log: the stream, its relay, pulls, leases and replays."""
