// Idempotent producer: keyed messages with headers to explicit partitions, one plain send per
// partition and one gzip sendBatch; prints what the broker acknowledged.
'use strict';
const { CompressionTypes } = require('kafkajs');
const { client, main } = require('./common');

main(async ({ bootstrap, topic, partitions, perPartition }) => {
  const producer = client(bootstrap, 'compat-producer').producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const acks = [];
  for (let p = 0; p < partitions; p++) {
    const messages = [];
    for (let i = 0; i < perPartition; i++) {
      messages.push({ key: `k${p}-${i}`, value: `v${p}-${i}`, partition: p, headers: { seq: `${i}`, src: 'kafkajs' } });
    }
    const res = await producer.send({ topic, acks: -1, messages });
    acks.push(...res.map((r) => ({ partition: r.partition, baseOffset: Number(r.baseOffset), errorCode: r.errorCode })));
  }
  const batch = [];
  for (let p = 0; p < partitions; p++) {
    batch.push({ key: `z${p}`, value: `gz${p}`.repeat(50), partition: p });
  }
  const res = await producer.sendBatch({ acks: -1, compression: CompressionTypes.GZIP, topicMessages: [{ topic, messages: batch }] });
  acks.push(...res.map((r) => ({ partition: r.partition, baseOffset: Number(r.baseOffset), errorCode: r.errorCode, gzip: true })));
  await producer.disconnect();
  return { acks };
});
