pytest_plugins = ["tests.support.zookeeper", "tests.support.bookies", "tests.support.gateway", "tests.support.seaweed"]
