// Two consumers in one group share a topic's partitions; each message is seen once, in order
// per partition; offsets are committed and then read back through the admin client.
'use strict';
const { client, main } = require('./common');

main(async ({ bootstrap, topic, groupId, expected }) => {
  const kafka = client(bootstrap, 'compat-consumer');
  const seen = [];
  const assignments = {};
  const consumers = [0, 1].map(() => kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500, rebalanceTimeout: 10000 }));
  let resolveDone;
  const done = new Promise((r) => { resolveDone = r; });
  for (const [idx, consumer] of consumers.entries()) {
    consumer.on(consumer.events.GROUP_JOIN, (e) => { assignments[idx] = e.payload.memberAssignment[topic] || []; });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
  }
  // Start both, then wait until both are in the group before any is allowed to finish.
  for (const [idx, consumer] of consumers.entries()) {
    await consumer.run({
      autoCommit: true,
      autoCommitInterval: 200,
      eachMessage: async ({ partition, message }) => {
        seen.push({
          member: idx, partition, offset: Number(message.offset), key: message.key && message.key.toString(),
          value: message.value.toString(), headers: Object.fromEntries(Object.entries(message.headers || {}).map(([k, v]) => [k, v.toString()])),
        });
        if (seen.length >= expected) resolveDone();
      },
    });
  }
  const timeout = setTimeout(() => resolveDone(), 60000);
  await done;
  clearTimeout(timeout);
  // Let the last auto-commit happen, then leave (which commits too).
  await new Promise((r) => setTimeout(r, 500));
  for (const c of consumers) await c.disconnect();
  const admin = kafka.admin();
  await admin.connect();
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
  const groups = await admin.describeGroups([groupId]);
  await admin.disconnect();
  return {
    seen, assignments,
    committed: committed[0].partitions.map((p) => ({ partition: p.partition, offset: Number(p.offset) })),
    state: groups.groups[0].state,
  };
});
