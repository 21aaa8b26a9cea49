package quire.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.quota.ClientQuotaFilter;

/**
 * The cluster operations admin tools call, on one new topic of 2 partitions: describe its
 * partitions (DescribeTopicPartitions), elect preferred leaders, list and alter partition
 * reassignments, describe the metadata quorum, describe and update features, describe client
 * quotas; create a topic and add a partition with manual replica assignments. Each result or
 * error class is emitted.
 */
final class ClusterOpsCommand {
    private ClusterOpsCommand() {}

    static void run(Harness.Args a) throws Exception {
        String topic = a.str("topic");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) -1))).all().get();
            TopicDescription d = awaitLeaders(admin, topic);
            List<Map<String, Object>> parts = new ArrayList<>();
            for (TopicPartitionInfo pi : d.partitions()) {
                parts.add(Map.of("partition", pi.partition(), "leader", pi.leader().id(),
                        "replicas", pi.replicas().stream().map(n -> n.id()).toList(),
                        "elr", pi.elr() == null ? List.of() : pi.elr().stream().map(n -> n.id()).toList()));
            }
            Harness.emit("described", "partitions", parts, "topic_id", d.topicId().toString());
            int owner = d.partitions().get(0).leader().id();
            TopicPartition tp0 = new TopicPartition(topic, 0);

            Map<String, Object> elected = new TreeMap<>();
            admin.electLeaders(ElectionType.PREFERRED, Set.of(tp0, new TopicPartition(topic, 1))).partitions().get()
                    .forEach((tp, err) -> elected.put(String.valueOf(tp.partition()),
                            err.map(e -> e.getClass().getSimpleName()).orElse("none")));
            Harness.emit("elected", "partitions", elected);

            Harness.emit("reassignments", "count", admin.listPartitionReassignments().reassignments().get().size());
            Harness.emit("reassign_same", "error", errorOf(() -> admin.alterPartitionReassignments(
                    Map.of(tp0, Optional.of(new NewPartitionReassignment(List.of(owner))))).all().get()));
            Harness.emit("reassign_ghost", "error", errorOf(() -> admin.alterPartitionReassignments(
                    Map.of(tp0, Optional.of(new NewPartitionReassignment(List.of(owner + 100))))).all().get()));
            Harness.emit("reassign_cancel", "error", errorOf(() -> admin.alterPartitionReassignments(
                    Map.of(tp0, Optional.empty())).all().get()));

            Harness.emit("quorum", "error", errorOf(() -> admin.describeMetadataQuorum().quorumInfo().get()));
            FeatureMetadata fm = admin.describeFeatures().featureMetadata().get();
            Harness.emit("features", "finalized", fm.finalizedFeatures().keySet(),
                    "supported", fm.supportedFeatures().keySet());
            Harness.emit("update_feature", "error", errorOf(() -> admin.updateFeatures(
                    Map.of("quire.test.version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions()).all().get()));
            Harness.emit("quotas", "count", admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get().size());

            // Manual replica assignments naming the owner gateway, then an unknown one.
            String placed = topic + "-placed";
            admin.createTopics(List.of(new NewTopic(placed, Map.of(0, List.of(owner), 1, List.of(owner)))))
                    .all().get();
            admin.createPartitions(Map.of(placed, NewPartitions.increaseTo(3, List.of(List.of(owner))))).all().get();
            Harness.emit("placed", "partitions", awaitLeaders(admin, placed).partitions().stream()
                    .map(pi -> pi.leader().id() == owner).toList());
            Harness.emit("misplaced", "error", errorOf(() -> admin.createTopics(List.of(
                    new NewTopic(topic + "-misplaced", Map.of(0, List.of(owner + 100))))).all().get()),
                    "grow_error", errorOf(() -> admin.createPartitions(Map.of(placed,
                            NewPartitions.increaseTo(4, List.of(List.of(owner, owner))))).all().get()));
        }
    }

    private static TopicDescription awaitLeaders(Admin admin, String topic) throws Exception {
        long start = System.currentTimeMillis();
        while (true) {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            if (d.partitions().stream().allMatch(pi -> pi.leader() != null && pi.leader().id() >= 0)) return d;
            if (System.currentTimeMillis() - start > 30_000) throw new IllegalStateException(topic + ": no leaders");
            Thread.sleep(100);
        }
    }

    @FunctionalInterface
    private interface Call {
        void call() throws Exception;
    }

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
