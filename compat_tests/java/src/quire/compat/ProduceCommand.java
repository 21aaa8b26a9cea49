package quire.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An idempotent acks=all KafkaProducer: record i goes to partition i % partitions with key
 * "k-i" (with keys=N: "k-(i % N)"), value "v-i" and a header, all sent asynchronously (so several batches are in flight per
 * partition and sequence numbers matter), then flushed. One "ack" line per record, in send order.
 */
final class ProduceCommand {
    private ProduceCommand() {}

    static void run(Harness.Args a) throws Exception {
        String topic = a.str("topic");
        int count = a.integer("count");
        int partitions = a.integer("partitions", 1);
        int keys = a.integer("keys", 0);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.LINGER_MS_CONFIG, a.str("linger.ms", "5"));
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, a.str("batch.size", "4096"));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.str("compression", "none"));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> rec =
                        new ProducerRecord<>(topic, i % partitions, "k-" + (keys > 0 ? i % keys : i), "v-" + i);
                rec.headers().add("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                acks.add(producer.send(rec));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata md = acks.get(i).get();
                Harness.emit("ack", "i", i, "partition", md.partition(), "offset", md.offset());
            }
        }
    }
}
