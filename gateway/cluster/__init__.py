"""Gateway cluster: membership, deterministic partition assignment, ownership leases."""
