"""PySpark data source over the store and migration tooling."""
