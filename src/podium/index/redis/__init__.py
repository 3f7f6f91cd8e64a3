"""The Redis rank index (one node, Sentinel or Cluster): boards, profiles, snapshots,
rebuilds, layouts, the shared read limit."""
