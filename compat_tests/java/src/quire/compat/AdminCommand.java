package quire.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Admin end to end on one topic: describe cluster, create (twice: the second must fail),
 * describe topic and configs, alter configs incrementally, add partitions, produce 10 records
 * with known timestamps, list offsets (earliest, latest, max timestamp, by timestamp), delete
 * records, list offsets again, delete the topic.
 */
final class AdminCommand {
    static final long BASE_TS = 1_700_000_000_000L;

    private AdminCommand() {}

    static void run(Harness.Args a) throws Exception {
        String bootstrap = a.str("bootstrap");
        String topic = a.str("topic");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(p)) {
            DescribeClusterResult cluster = admin.describeCluster();
            List<Map<String, Object>> nodes = new ArrayList<>();
            for (Node n : cluster.nodes().get()) nodes.add(Map.of("id", n.id(), "host", n.host(), "port", n.port()));
            Node controller = cluster.controller().get();
            Harness.emit("cluster", "cluster_id", cluster.clusterId().get(), "nodes", nodes,
                    "controller", controller == null ? null : controller.id());

            NewTopic nt = new NewTopic(topic, 3, (short) -1).configs(Map.of("retention.ms", "86400000"));
            admin.createTopics(List.of(nt)).all().get();
            Harness.emit("created", "topic", topic);
            Harness.emit("create_again", "error", errorOf(() -> admin.createTopics(List.of(nt)).all().get()));
            Harness.emit("listed", "present", admin.listTopics().names().get().contains(topic));
            awaitLeaders(admin, topic, 3);
            describeTopic(admin, topic, "described");

            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            describeConfigs(admin, res, "configs_before");
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "500000"), AlterConfigOp.OpType.SET))))
                    .all().get();
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE))))
                    .all().get();
            describeConfigs(admin, res, "configs_after");
            Harness.emit("bad_config", "error", errorOf(() -> admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all().get()));

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            awaitLeaders(admin, topic, 4);
            describeTopic(admin, topic, "grown");

            produceTimestamped(bootstrap, topic, 10);
            TopicPartition tp0 = new TopicPartition(topic, 0);
            listOffsets(admin, tp0, "offsets_before");
            Map<TopicPartition, RecordsToDelete> del = Map.of(tp0, RecordsToDelete.beforeOffset(4));
            long low = admin.deleteRecords(del).lowWatermarks().get(tp0).get().lowWatermark();
            Harness.emit("deleted_records", "low_watermark", low);
            listOffsets(admin, tp0, "offsets_after");

            admin.deleteTopics(List.of(topic)).all().get();
            Harness.emit("deleted", "present", admin.listTopics().names().get().contains(topic),
                    "describe_error", errorOf(() -> admin.describeTopics(List.of(topic)).allTopicNames().get()));
        }
    }

    /**
     * As against a multi-broker Kafka, a new topic's metadata reaches every broker a little after
     * CreateTopics returns: wait (up to 30 s) until each partition has a leader.
     */
    private static void awaitLeaders(Admin admin, String topic, int partitions) throws Exception {
        long start = System.currentTimeMillis();
        while (true) {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                if (d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(pi -> pi.leader() != null && pi.leader().id() >= 0)) {
                    Harness.emit("leaders_after", "partitions", partitions, "waited_ms", System.currentTimeMillis() - start);
                    return;
                }
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) throw e;
            }
            if (System.currentTimeMillis() - start > 30_000) {
                throw new IllegalStateException(topic + ": partitions without a leader after 30 s");
            }
            Thread.sleep(100);
        }
    }

    private static void describeTopic(Admin admin, String topic, String event) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Map<String, Object>> parts = new ArrayList<>();
        for (TopicPartitionInfo pi : d.partitions()) {
            parts.add(Map.of("partition", pi.partition(), "leader", pi.leader() == null ? -1 : pi.leader().id(),
                    "replicas", pi.replicas().size(), "isr", pi.isr().size()));
        }
        Harness.emit(event, "name", d.name(), "internal", d.isInternal(), "topic_id", d.topicId().toString(),
                "partitions", parts);
    }

    private static void describeConfigs(Admin admin, ConfigResource res, String event) throws Exception {
        Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry e : cfg.entries()) {
            out.put(e.name(), Map.of("value", String.valueOf(e.value()), "source", e.source().name()));
        }
        Harness.emit(event, "configs", out);
    }

    private static void produceTimestamped(String bootstrap, String topic, int n) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                // Timestamps go up by 1 s, except record 7 which carries the maximum.
                long ts = BASE_TS + (i == 7 ? 100_000 : i * 1000L);
                prod.send(new ProducerRecord<>(topic, 0, ts, "k" + i, "v" + i)).get();
            }
        }
    }

    private static void listOffsets(Admin admin, TopicPartition tp, String event) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        Map<String, OffsetSpec> specs = Map.of(
                "earliest", OffsetSpec.earliest(),
                "latest", OffsetSpec.latest(),
                "max_timestamp", OffsetSpec.maxTimestamp(),
                "ts_plus_2500", OffsetSpec.forTimestamp(BASE_TS + 2500),
                "ts_future", OffsetSpec.forTimestamp(BASE_TS + 10_000_000));
        for (Map.Entry<String, OffsetSpec> s : specs.entrySet()) {
            ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, s.getValue())).partitionResult(tp).get();
            out.put(s.getKey(), Map.of("offset", info.offset(), "timestamp", info.timestamp()));
        }
        Harness.emit(event, "offsets", out);
    }

    interface Call {
        Object call() throws Exception;
    }

    /** The exception class a call fails with (null when it succeeds). */
    private static String errorOf(Call c) {
        try {
            c.call();
            return null;
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }
}
