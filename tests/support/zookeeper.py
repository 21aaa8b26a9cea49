"""pytest fixtures: a real ZooKeeper (Debian's package) on a free loopback port."""
