package quire.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactional KafkaProducer scenarios (mode=...):
 *  commit / abort: one transaction of `count` records to `topic` (round robin over `partitions`),
 *    committed or aborted;
 *  fence: producer A opens a transaction, producer B with the same transactional.id initializes,
 *    A's commit fails (its exception class printed), B commits its own records;
 *  offsets: consume-transform-produce: a consumer in group `group` (group.protocol `protocol`,
 *    classic by default) reads `count` records of
 *    `topic`, the producer writes them upper-cased to `out` and sends the offsets to the
 *    transaction, which `end`s (commit/abort); prints what the group has committed after;
 *  timeout: a transaction left open until the coordinator aborted it (transaction.timeout.ms);
 *    the producer's next send and commit fail (printed);
 *  bench: `count` records of `size` bytes to `topic`, acks=all, in transactions of `txn.size`
 *    records (0: an idempotent producer without transactions); prints MB/s (2^20) and the
 *    commitTransaction latencies (p50, p99, ms);
 *  read: an `isolation` (read_committed) consumer assigned every partition of `topic` prints every
 *    record's value up to the end offsets (the last stable offsets for read_committed).
 */
final class TxnCommand {
    private TxnCommand() {}

    static Properties producerProps(Harness.Args a, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, a.str("transaction.timeout.ms", "60000"));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return p;
    }

    /**
     * Waits until `txn`'s transaction is `wanted` (CompleteCommit / CompleteAbort) at its
     * coordinator. commitTransaction and abortTransaction return once the outcome is prepared; the
     * markers land after (in Kafka too), so a read_committed read or an offset fetch right after
     * may not see the outcome yet (on a loaded machine, it did not).
     */
    static void awaitState(String bootstrap, String txn, TransactionState wanted) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            long deadline = System.currentTimeMillis() + 120000;
            while (true) {
                TransactionState st = admin.describeTransactions(List.of(txn)).description(txn).get().state();
                if (st == wanted) return;
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("still " + st);
                Thread.sleep(50);
            }
        }
    }

    static void awaitEnded(Harness.Args a, String txn, boolean commit) throws Exception {
        awaitState(a.str("bootstrap"), txn, commit ? TransactionState.COMPLETE_COMMIT : TransactionState.COMPLETE_ABORT);
    }

    static void send(KafkaProducer<String, String> p, String topic, int partitions, String prefix, int count)
            throws Exception {
        for (int i = 0; i < count; i++) {
            p.send(new ProducerRecord<>(topic, i % partitions, "k-" + i, prefix + i)).get();
        }
    }

    static void run(Harness.Args a) throws Exception {
        String mode = a.str("mode");
        switch (mode) {
            case "commit", "abort" -> single(a, mode.equals("commit"));
            case "fence" -> fence(a);
            case "offsets" -> offsets(a);
            case "timeout" -> timeout(a);
            case "read" -> read(a);
            case "bench" -> bench(a);
            default -> throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    static void single(Harness.Args a, boolean commit) throws Exception {
        String topic = a.str("topic");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(a, a.str("txn")))) {
            p.initTransactions();
            p.beginTransaction();
            send(p, topic, a.integer("partitions", 1), a.str("prefix", commit ? "c-" : "a-"), a.integer("count"));
            if (commit) p.commitTransaction(); else p.abortTransaction();
            awaitEnded(a, a.str("txn"), commit);
            Harness.emit(commit ? "committed" : "aborted");
        }
    }

    static void fence(Harness.Args a) throws Exception {
        String topic = a.str("topic");
        String txn = a.str("txn");
        try (KafkaProducer<String, String> first = new KafkaProducer<>(producerProps(a, txn));
             KafkaProducer<String, String> second = new KafkaProducer<>(producerProps(a, txn))) {
            first.initTransactions();
            first.beginTransaction();
            send(first, topic, 1, "zombie-", 3);
            second.initTransactions();
            Harness.emit("second_initialized");
            try {
                first.send(new ProducerRecord<>(topic, 0, "k", "zombie-late")).get();
                first.commitTransaction();
                Harness.emit("first_committed");
            } catch (Exception e) {
                Throwable root = e;
                while (root.getCause() != null && root != root.getCause()) root = root.getCause();
                Harness.emit("first_failed", "type", e.getClass().getName(), "root", root.getClass().getName());
            }
            second.beginTransaction();
            send(second, topic, 1, "second-", 2);
            second.commitTransaction();
            awaitEnded(a, txn, true);
            Harness.emit("second_committed");
        }
    }

    static void offsets(Harness.Args a) throws Exception {
        String topic = a.str("topic");
        String out = a.str("out");
        String group = a.str("group");
        int count = a.integer("count");
        boolean commit = a.str("end", "commit").equals("commit");
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, a.str("protocol", "classic"));
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
             KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(a, a.str("txn")))) {
            p.initTransactions();
            consumer.subscribe(List.of(topic));
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60000;
            p.beginTransaction();
            while (seen < count) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("consumed only " + seen);
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    p.send(new ProducerRecord<>(out, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    seen++;
                }
            }
            p.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            if (commit) p.commitTransaction(); else p.abortTransaction();
            // the group's offsets (fetched without require_stable) show once the markers landed
            awaitEnded(a, a.str("txn"), commit);
            Harness.emit(commit ? "committed" : "aborted");
        }
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        try (Admin admin = Admin.create(ap)) {
            Map<Integer, Long> got = new TreeMap<>();
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .forEach((tp, om) -> got.put(tp.partition(), om == null ? -1L : om.offset()));
            Harness.emit("group_offsets", "offsets", got);
        }
    }

    static void timeout(Harness.Args a) throws Exception {
        String topic = a.str("topic");
        String txn = a.str("txn");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(a, txn))) {
            p.initTransactions();
            p.beginTransaction();
            Exception failed = null;
            try {
                send(p, topic, 1, "timed-out-", 2);
            } catch (Exception e) {
                // a slow machine: the timeout (and the coordinator's abort) fell between the sends
                failed = e;
            }
            // the producer idles until the coordinator has aborted its transaction
            awaitState(a.str("bootstrap"), txn, TransactionState.COMPLETE_ABORT);
            Harness.emit("coordinator_aborted");
            if (failed == null) {
                try {
                    p.send(new ProducerRecord<>(topic, 0, "k", "timed-out-late")).get();
                    p.commitTransaction();
                    Harness.emit("committed");
                } catch (Exception e) {
                    failed = e;
                }
            }
            if (failed != null) Harness.emit("failed", "type", failed.getClass().getName());
        }
    }

    static void read(Harness.Args a) throws Exception {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, a.str("isolation", "read_committed"));
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            List<TopicPartition> tps = new ArrayList<>();
            consumer.partitionsFor(a.str("topic")).forEach(pi -> tps.add(new TopicPartition(pi.topic(), pi.partition())));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            // read_committed: the end offsets are the last stable offsets; read up to them
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + a.integer("timeout.ms", 30000);
            while (tps.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("read only " + values);
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) values.add(r.value());
            }
            Map<Integer, Long> endOut = new TreeMap<>();
            ends.forEach((tp, o) -> endOut.put(tp.partition(), o));
            Harness.emit("read", "values", values, "end_offsets", endOut);
        }
    }

    static void bench(Harness.Args a) throws Exception {
        String topic = a.str("topic");
        int count = a.integer("count");
        int size = a.integer("size", 1024);
        int txnSize = a.integer("txn.size", 1000);
        byte[] value = new byte[size];
        java.util.Arrays.fill(value, (byte) 'x');
        Properties p = producerProps(a, "unused");
        if (txnSize <= 0) p.remove(ProducerConfig.TRANSACTIONAL_ID_CONFIG);
        else p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.str("txn"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
                org.apache.kafka.common.serialization.ByteArraySerializer.class.getName());
        List<Long> commits = new ArrayList<>();
        try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(p)) {
            if (txnSize > 0) producer.initTransactions();
            long start = System.nanoTime();
            int sent = 0;
            while (sent < count) {
                int n = txnSize > 0 ? Math.min(txnSize, count - sent) : count;
                if (txnSize > 0) producer.beginTransaction();
                for (int i = 0; i < n; i++) producer.send(new ProducerRecord<>(topic, null, value));
                if (txnSize > 0) {
                    producer.flush();  // the records are acknowledged: what follows is the commit alone
                    long t0 = System.nanoTime();
                    producer.commitTransaction();
                    commits.add(System.nanoTime() - t0);
                } else {
                    producer.flush();
                }
                sent += n;
            }
            double secs = (System.nanoTime() - start) / 1e9;
            java.util.Collections.sort(commits);
            double p50 = commits.isEmpty() ? -1 : commits.get(commits.size() / 2) / 1e6;
            double p99 = commits.isEmpty() ? -1 : commits.get(Math.min(commits.size() - 1,
                    (int) Math.ceil(commits.size() * 0.99) - 1)) / 1e6;
            Harness.emit("bench", "records", count, "seconds", secs,
                    "mbps", (double) count * size / (1 << 20) / secs, "commit_p50_ms", p50, "commit_p99_ms", p99,
                    "transactions", commits.size());
        }
    }
}
