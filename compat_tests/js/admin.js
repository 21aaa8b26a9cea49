// Admin: create topics (one with configs), list, describe metadata, describe configs,
// add partitions, fetch offsets, delete; plus the error for a duplicate create.
'use strict';
const { ConfigResourceTypes } = require('kafkajs');
const { client, main } = require('./common');

main(async ({ bootstrap, topicA, topicB }) => {
  const admin = client(bootstrap, 'compat-admin').admin();
  await admin.connect();
  const out = {};
  out.created = await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: topicA, numPartitions: 3 },
      { topic: topicB, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] },
    ],
  });
  try {
    await admin.createTopics({ topics: [{ topic: topicA, numPartitions: 1 }] }).then((r) => { out.duplicate = r; });
  } catch (e) {
    out.duplicate = e.type || e.name;
  }
  out.listed = (await admin.listTopics()).filter((t) => t === topicA || t === topicB).sort();
  const md = await admin.fetchTopicMetadata({ topics: [topicA, topicB] });
  out.metadata = md.topics.map((t) => ({ name: t.name, partitions: t.partitions.map((p) => p.partitionId).sort() }));
  const cfg = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topicB, configNames: ['retention.ms', 'cleanup.policy'] }],
  });
  out.configs = Object.fromEntries(cfg.resources[0].configEntries.map((c) => [c.configName, { value: c.configValue, isDefault: c.isDefault }]));
  await admin.createPartitions({ topicPartitions: [{ topic: topicA, count: 5 }] });
  // New partitions get their leaders asynchronously (on Kafka too): retry like a client would.
  let offsets;
  for (let i = 0; ; i++) {
    try {
      offsets = await admin.fetchTopicOffsets(topicA);
      if (offsets.length === 5) break;
    } catch (e) {
      if (i >= 50) throw e;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  out.offsets = offsets.map((o) => ({ partition: o.partition, low: Number(o.low), high: Number(o.high) })).sort((a, b) => a.partition - b.partition);
  await admin.deleteTopics({ topics: [topicA, topicB] });
  // Deletion is visible to the next listing (kafkajs refreshes metadata).
  let remaining = [];
  for (let i = 0; i < 50; i++) {
    remaining = (await admin.listTopics()).filter((t) => t === topicA || t === topicB);
    if (remaining.length === 0) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  out.afterDelete = remaining;
  await admin.disconnect();
  return out;
});
