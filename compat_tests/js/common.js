// Shared setup of the kafkajs scenarios: a client on the given bootstrap, quiet logs, and
// printing one JSON result line that the pytest side asserts on.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

function client(bootstrap, clientId) {
  return new Kafka({
    clientId: clientId || 'quire-compat',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    retry: { retries: 8, initialRetryTime: 100 },
  });
}

function main(fn) {
  fn(JSON.parse(process.argv[2]))
    .then((result) => {
      process.stdout.write(JSON.stringify(result) + '\n');
      process.exit(0);
    })
    .catch((err) => {
      process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
      process.exit(1);
    });
}

module.exports = { client, main };
