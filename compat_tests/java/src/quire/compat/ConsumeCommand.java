package quire.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
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

    static Properties props(Harness.Args a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.str("group"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, a.str("max.poll.records", "500"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }
}
