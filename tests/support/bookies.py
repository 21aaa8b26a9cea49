"""pytest fixtures: bookies as real `quire bookie` processes."""
