package quire.compat;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.List;
import java.util.HexFormat;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A KafkaConsumer in a classic group (subscribe) reading `count` records from the earliest
 * offset; prints each record, commits synchronously, then prints what the group committed.
 */
final class ConsumeCommand {
    private ConsumeCommand() {}

    static void run(Harness.Args a) throws Exception {
        String topic = a.str("topic");
        int count = a.integer("count");
        long deadline = System.currentTimeMillis() + a.integer("timeout.ms", 60000);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props(a))) {
            c.subscribe(List.of(topic));
            int seen = 0;
            while (seen < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("consumed " + seen + " of " + count + " before the deadline");
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    Header h = r.headers().lastHeader("seq");
                    Harness.emit("record", "partition", r.partition(), "offset", r.offset(), "key", r.key(),
                            "value", r.value(),
                            "seq", h == null ? null : new String(h.value(), StandardCharsets.UTF_8));
                    seen++;
                }
            }
            c.commitSync();
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
            Map<Integer, Long> out = new TreeMap<>();
            committed.forEach((tp, om) -> out.put(tp.partition(), om == null ? -1L : om.offset()));
            Harness.emit("committed", "offsets", out);
        }
    }

    /**
     * Assign one partition (no group), read `count` records from offset 0 as bytes, and print
     * their count and a SHA-256 over (4-byte big-endian length, value) of each in offset order
     * (offsets must be dense); with timestamp=T also what offsetsForTimes answers for T.
     */
    static void checksum(Harness.Args a) throws Exception {
        TopicPartition tp = new TopicPartition(a.str("topic"), a.integer("partition", 0));
        long count = Long.parseLong(a.str("count"));
        long deadline = System.currentTimeMillis() + a.integer("timeout.ms", 120000);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.seek(tp, 0);
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            long next = 0;
            long bytes = 0;
            while (next < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("consumed " + next + " of " + count + " before the deadline");
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    if (r.offset() != next) {
                        throw new IllegalStateException("offset " + r.offset() + " where " + next + " was due");
                    }
                    byte[] v = r.value();
                    md.update(ByteBuffer.allocate(4).putInt(v == null ? -1 : v.length).array());
                    if (v != null) {
                        md.update(v);
                        bytes += v.length;
                    }
                    next++;
                }
            }
            Harness.emit("checksum", "count", next, "bytes", bytes, "sha256", HexFormat.of().formatHex(md.digest()));
            String ts = a.str("timestamp", null);
            if (ts != null) {
                OffsetAndTimestamp at = c.offsetsForTimes(Map.of(tp, Long.parseLong(ts))).get(tp);
                Harness.emit("offset_for_time", "offset", at == null ? -1L : at.offset(),
                        "timestamp", at == null ? -1L : at.timestamp());
            }
        }
    }

    static Properties props(Harness.Args a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.str("group"));
        // "consumer": the KIP-848 protocol (server-side assignment, ConsumerGroupHeartbeat).
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, a.str("protocol", "classic"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, a.str("max.poll.records", "500"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }
}
