package quire.compat.streams;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * Kafka Streams (kafka-streams 4.3.1 on its own classpath) for the compat harness, one JSON event
 * per line on stdout like quire.compat.Harness:
 *  - run: the word count (flatMapValues split, groupBy word, count into the KTable "counts",
 *    whose changelog is compacted, to the output topic) until stdin closes, then a clean close;
 *  - produce: one record per stdin line (no key, acks=all, idempotent) to a topic;
 *  - read: a topic from its start to its end (read_committed by default), the latest value per
 *    key (8-byte values decoded as longs), the record count, and with sequences=true every value
 *    per key in offset order.
 * run emits "progress" every progress.every input records it has seen (peek, before the count).
 * Arguments are key=value; "topic.X=..." in run goes to Streams' internal topics' configs.
 */
public final class WordCount {
    private static final ObjectMapper JSON = new ObjectMapper();

    private WordCount() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new LinkedHashMap<>();
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            if (eq < 0) throw new IllegalArgumentException("expected key=value: " + argv[i]);
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
        try {
            switch (argv.length > 0 ? argv[0] : "") {
                case "run" -> run(args);
                case "produce" -> produce(args);
                case "read" -> read(args);
                default -> throw new IllegalArgumentException("usage: WordCount run|produce|read key=value...");
            }
            emit("done");
        } catch (Exception e) {
            Throwable root = e;
            while (root.getCause() != null && root != root.getCause()) root = root.getCause();
            emit("error", "type", root.getClass().getName(), "message", String.valueOf(root.getMessage()));
            e.printStackTrace();
            System.out.flush();
            System.exit(1);
        }
        System.out.flush();
        System.exit(0);
    }

    static synchronized void emit(String event, Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        for (int i = 0; i + 1 < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        try {
            System.out.println(JSON.writeValueAsString(m));
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    private static String need(Map<String, String> a, String key) {
        String v = a.get(key);
        if (v == null) throw new IllegalArgumentException("missing argument " + key + "=");
        return v;
    }

    static void run(Map<String, String> a) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, need(a, "app.id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, need(a, "bootstrap"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, need(a, "state.dir"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, a.getOrDefault("guarantee", StreamsConfig.AT_LEAST_ONCE));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, a.getOrDefault("commit.interval.ms", "200"));
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0"); // every update reaches the changelog
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "-1");
        for (Map.Entry<String, String> e : a.entrySet()) {
            if (e.getKey().equals("num.stream.threads") || e.getKey().startsWith("topic.") || e.getKey().startsWith("producer.")
                    || e.getKey().startsWith("consumer.") || e.getKey().startsWith("main.consumer.")
                    || e.getKey().startsWith("restore.consumer.")) p.put(e.getKey(), e.getValue());
        }
        StreamsBuilder b = new StreamsBuilder();
        KStream<String, String> lines = b.stream(need(a, "input"));
        long every = Long.parseLong(a.getOrDefault("progress.every", "100"));
        AtomicLong seen = new AtomicLong();
        lines.peek((k, v) -> {
                    long n = seen.incrementAndGet();
                    if (n % every == 0) emit("progress", "records", n);
                })
                .flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\s+")))
                .filter((k, w) -> !w.isEmpty())
                .groupBy((k, w) -> w, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(need(a, "output"), Produced.with(Serdes.String(), Serdes.Long()));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, before) -> emit("state", "state", now.name(), "before", before.name()));
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
                emit("restore_start", "partition", tp.toString(), "store", store, "start", start, "end", end);
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                emit("restored", "partition", tp.toString(), "store", store, "records", total);
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("uncaught", "type", e.getClass().getName(), "message", String.valueOf(e.getMessage()));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        // Runs until stdin closes: the test's way to stop the application cleanly.
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {}
        streams.close(Duration.ofSeconds(60));
        emit("closed", "state", streams.state().name());
    }

    static void produce(Map<String, String> a) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, need(a, "bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String topic = need(a, "topic");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        long n = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            String line;
            while ((line = in.readLine()) != null) {
                producer.send(new ProducerRecord<>(topic, null, line));
                n++;
            }
            producer.flush();
        }
        emit("produced", "records", n);
    }

    static void read(Map<String, String> a) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, need(a, "bootstrap"));
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, a.getOrDefault("isolation", "read_committed"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        String topic = need(a, "topic");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps); // the LSO under read_committed
            Map<String, Object> latest = new TreeMap<>();
            Map<String, List<Object>> values = new TreeMap<>();
            boolean sequences = Boolean.parseBoolean(a.getOrDefault("sequences", "false"));
            long records = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("read did not reach " + end);
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    records++;
                    String k = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
                    byte[] v = r.value();
                    Object value = v == null ? null : v.length == 8 ? (Object) ByteBuffer.wrap(v).getLong()
                            : new String(v, StandardCharsets.UTF_8);
                    latest.put(k, value);
                    if (sequences) values.computeIfAbsent(k, x -> new ArrayList<>()).add(value);
                }
            }
            long span = 0;
            for (TopicPartition tp : tps) span += end.get(tp) - begin.get(tp);
            emit("read", "records", records, "span", span, "latest", latest, "values", values);
        }
    }
}
