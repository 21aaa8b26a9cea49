pytest_plugins = ["tests.support.zookeeper", "tests.support.bookies"]
