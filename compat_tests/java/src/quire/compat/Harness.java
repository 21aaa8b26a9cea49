package quire.compat;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The compat harness's own Java program: KafkaProducer, KafkaConsumer and Admin scenarios against
 * any bootstrap address. Arguments are key=value pairs after the command; every observation is
 * printed as one JSON object per line on stdout, so the pytest side asserts on data, not logs.
 */
public final class Harness {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long START = System.nanoTime();

    private Harness() {}

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            System.err.println("usage: Harness produce|consume|checksum|groups|admin|cluster-ops|share|share-describe|share-bench|share-redelivery|txn key=value...");
            System.exit(2);
        }
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            if (eq < 0) throw new IllegalArgumentException("expected key=value: " + argv[i]);
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
        try {
            switch (argv[0]) {
                case "produce" -> ProduceCommand.run(new Args(args));
                case "consume" -> ConsumeCommand.run(new Args(args));
                case "checksum" -> ConsumeCommand.checksum(new Args(args));
                case "groups" -> GroupCommand.run(new Args(args));
                case "admin" -> AdminCommand.run(new Args(args));
                case "cluster-ops" -> ClusterOpsCommand.run(new Args(args));
                case "share" -> ShareCommand.run(new Args(args));
                case "share-describe" -> ShareCommand.describe(new Args(args));
                case "share-bench" -> ShareCommand.bench(new Args(args));
                case "share-redelivery" -> ShareCommand.redelivery(new Args(args));
                case "txn" -> TxnCommand.run(new Args(args));
                default -> throw new IllegalArgumentException("unknown command " + argv[0]);
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
        // Kafka client threads are non-daemon in places: exit explicitly once done.
        System.exit(0);
    }

    /** Print one event line: emit("x", "k1", v1, "k2", v2, ...). */
    static synchronized void emit(String event, Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        m.put("ms", (System.nanoTime() - START) / 1_000_000);
        for (int i = 0; i + 1 < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        try {
            System.out.println(JSON.writeValueAsString(m));
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /** Required and optional key=value arguments. */
    static final class Args {
        private final Map<String, String> values;

        Args(Map<String, String> values) {
            this.values = values;
        }

        String str(String key) {
            String v = values.get(key);
            if (v == null) throw new IllegalArgumentException("missing argument " + key + "=");
            return v;
        }

        String str(String key, String dflt) {
            return values.getOrDefault(key, dflt);
        }

        int integer(String key) {
            return Integer.parseInt(str(key));
        }

        int integer(String key, int dflt) {
            return values.containsKey(key) ? Integer.parseInt(values.get(key)) : dflt;
        }
    }
}
