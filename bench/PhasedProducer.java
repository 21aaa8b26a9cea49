// A producer at a fixed rate whose latencies are kept per phase, the phases switched by the
// program that runs it: one JVM (compiled once, one set of connections) for a whole comparison,
// so each phase is measured in windows interleaved with the others' rather than in runs of its
// own. Used by bench/spark_scan.py; run as a single source file:
//   java -cp <kafka-clients jars> bench/PhasedProducer.java BOOTSTRAP TOPIC RECORDS_PER_S RECORD_SIZE SETTLE_MS
// stdin, a line each: "phase NAME" (the records sent from now on count to NAME, once SETTLE_MS have
// passed; those sent before count to no phase), "stop" (flush, close, report, exit).
// stdout: one JSON object per line: {"event": "window", ...} per phase window, then
// {"event": "phase", ...} per phase (all its windows together), then {"event": "done"}.
// Latency is from just before send() to the callback, in whole milliseconds (as
// kafka-producer-perf-test measures it).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class PhasedProducer {
    static final int MAX_MS = 120_000;

    static final class Hist {
        final long[] counts = new long[MAX_MS + 1];
        long n;

        synchronized void add(long ms) {
            counts[(int) Math.min(Math.max(ms, 0), MAX_MS)]++;
            n++;
        }

        synchronized void addAll(Hist o) {
            for (int i = 0; i <= MAX_MS; i++) counts[i] += o.counts[i];
            n += o.n;
        }

        synchronized long pct(double q) {
            if (n == 0) return -1;
            long want = (long) Math.ceil(q * n);
            long seen = 0;
            for (int i = 0; i <= MAX_MS; i++) {
                seen += counts[i];
                if (seen >= want) return i;
            }
            return MAX_MS;
        }

        String json() {
            return String.format("\"records\": %d, \"p50_ms\": %d, \"p99_ms\": %d, \"p999_ms\": %d, \"max_ms\": %d",
                n, pct(0.5), pct(0.99), pct(0.999), pct(1.0));
        }
    }

    static final class Window {
        final String phase;
        final long settledAt; // nanoTime from which records count
        final Hist hist = new Hist();

        Window(String phase, long settledAt) {
            this.phase = phase;
            this.settledAt = settledAt;
        }
    }

    static volatile Window current;
    static volatile boolean stopping;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        long rate = Long.parseLong(args[2]);
        int size = Integer.parseInt(args[3]);
        long settleNs = Long.parseLong(args[4]) * 1_000_000L;
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        byte[] payload = new byte[size];
        Random random = new Random(0);
        for (int i = 0; i < size; i++) payload[i] = (byte) (random.nextInt(26) + 65);
        List<Window> windows = new ArrayList<>();
        AtomicLong errors = new AtomicLong();

        Thread control = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    line = line.trim();
                    if (line.startsWith("phase ")) {
                        Window w = new Window(line.substring(6).trim(), System.nanoTime() + settleNs);
                        synchronized (windows) {
                            windows.add(w);
                        }
                        current = w;
                    } else if (line.equals("stop")) {
                        break;
                    }
                }
            } catch (Exception e) {
                System.err.println("control: " + e);
            }
            stopping = true;
        }, "control");
        control.setDaemon(true);
        control.start();

        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            long start = System.nanoTime();
            long sent = 0;
            while (!stopping) {
                long now = System.nanoTime();
                // Kafka's ThroughputThrottler in effect: ahead of the rate, sleep it off.
                long due = start + sent * 1_000_000_000L / rate;
                if (due - now > 1_000_000L) {
                    Thread.sleep((due - now) / 1_000_000L);
                    continue;
                }
                Window w = current;
                Hist h = w != null && now >= w.settledAt ? w.hist : null;
                long t0 = System.currentTimeMillis();
                producer.send(new ProducerRecord<>(topic, payload), (md, exc) -> {
                    if (exc != null) {
                        errors.incrementAndGet();
                    } else if (h != null) {
                        h.add(System.currentTimeMillis() - t0);
                    }
                });
                sent++;
            }
            producer.flush();
        }
        Map<String, Hist> phases = new LinkedHashMap<>();
        for (Window w : windows) {
            System.out.println(String.format("{\"event\": \"window\", \"phase\": \"%s\", %s}", w.phase, w.hist.json()));
            phases.computeIfAbsent(w.phase, k -> new Hist()).addAll(w.hist);
        }
        for (Map.Entry<String, Hist> e : phases.entrySet()) {
            System.out.println(String.format("{\"event\": \"phase\", \"phase\": \"%s\", %s}", e.getKey(), e.getValue().json()));
        }
        System.out.println(String.format("{\"event\": \"done\", \"errors\": %d}", errors.get()));
        System.out.flush();
    }
}
