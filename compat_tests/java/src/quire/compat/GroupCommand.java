package quire.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;

/**
 * Two KafkaConsumers in one group (classic with the cooperative-sticky assignor, or with
 * protocol=consumer the KIP-848 protocol and the broker's assignor), polled in turn
 * from this thread: c1 alone, then c2 joins (incremental rebalance), then c2 leaves and c1
 * takes everything back. Offsets are committed after every poll and on revocation, so every
 * record of the (pre-produced) topic is consumed exactly once across the two members.
 */
final class GroupCommand {
    private GroupCommand() {}

    static void run(Harness.Args a) throws Exception {
        String topic = a.str("topic");
        int partitions = a.integer("partitions");
        int total = a.integer("count");
        long deadline = System.currentTimeMillis() + a.integer("timeout.ms", 90000);
        // protocol.c2 (default: protocol) lets c2 speak the other protocol: a mixed group.
        String protocol = a.str("protocol", "classic");
        Member c1 = new Member("c1", a, topic, protocol);
        Member c2 = new Member("c2", a, topic, a.str("protocol.c2", protocol));
        int[] consumed = {0};
        try {
            // Phase 1: c1 alone owns every partition and reads about a quarter of the records.
            while (c1.owned.size() < partitions || consumed[0] < total / 4) {
                check(deadline, "phase 1", consumed[0], total);
                consumed[0] += c1.pollOnce();
            }
            Harness.emit("phase", "name", "alone", "c1", c1.owned, "consumed", consumed[0]);
            // Phase 2: c2 joins; both keep polling until they split the partitions and c2 has read.
            c2.subscribe();
            // c1 reads nothing until c2 has partitions, so that however slow the rebalance, records
            // are left for c2 (c1 still polls: that is how it takes part in the rebalance).
            c1.consumer.pause(c1.consumer.assignment());
            boolean paused = true;
            while (!(c1.owned.size() + c2.owned.size() == partitions && !c1.owned.isEmpty()
                    && !c2.owned.isEmpty() && c2.consumed > 0) && consumed[0] < total) {
                check(deadline, "phase 2", consumed[0], total);
                if (paused && !c2.owned.isEmpty()) {
                    c1.consumer.resume(c1.consumer.paused());
                    paused = false;
                }
                consumed[0] += c1.pollOnce();
                consumed[0] += c2.pollOnce();
            }
            c1.consumer.resume(c1.consumer.paused());
            Harness.emit("phase", "name", "shared", "c1", c1.owned, "c2", c2.owned, "consumed", consumed[0]);
            // Phase 3: c2 leaves; c1 gets its partitions back and reads the rest.
            c2.close();
            while (c1.owned.size() < partitions || consumed[0] < total) {
                check(deadline, "phase 3", consumed[0], total);
                consumed[0] += c1.pollOnce();
            }
            Harness.emit("phase", "name", "rejoined", "c1", c1.owned, "consumed", consumed[0]);
            Map<TopicPartition, OffsetAndMetadata> committed = c1.consumer.committed(c1.consumer.assignment());
            Map<Integer, Long> out = new TreeMap<>();
            committed.forEach((tp, om) -> out.put(tp.partition(), om == null ? -1L : om.offset()));
            Harness.emit("committed", "offsets", out);
        } finally {
            c1.close();
            c2.close();
        }
    }

    private static void check(long deadline, String phase, int consumed, int total) {
        if (System.currentTimeMillis() > deadline) {
            throw new IllegalStateException(phase + " did not finish: consumed " + consumed + " of " + total);
        }
    }

    /** One group member and what it owns, kept in step by its rebalance listener. */
    private static final class Member implements ConsumerRebalanceListener {
        final String name;
        final String topic;
        final KafkaConsumer<String, String> consumer;
        final TreeSet<Integer> owned = new TreeSet<>();
        final Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        int consumed;
        boolean subscribed;
        boolean closed;

        Member(String name, Harness.Args a, String topic, String protocol) {
            this.name = name;
            this.topic = topic;
            Properties p = ConsumeCommand.props(a);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            if (protocol.equals("classic")) {
                p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
                // Members learn of a rebalance from a heartbeat: beat often so the test runs quickly.
                p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
            } else if (!a.str("assignor", "").isEmpty()) {
                // The consumer protocol: the broker assigns; the heartbeat interval is the broker's.
                p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, a.str("assignor"));
            }
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5");
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            this.consumer = new KafkaConsumer<>(p);
        }

        void subscribe() {
            consumer.subscribe(List.of(topic), this);
            subscribed = true;
        }

        int pollOnce() {
            if (!subscribed) subscribe();
            ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(100));
            for (ConsumerRecord<String, String> r : recs) {
                Harness.emit("record", "consumer", name, "partition", r.partition(), "offset", r.offset(),
                        "key", r.key(), "value", r.value(), "generation", consumer.groupMetadata().generationId());
                pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            commitPending();
            consumed += recs.count();
            return recs.count();
        }

        private void commitPending() {
            if (pending.isEmpty()) return;
            try {
                consumer.commitSync(new HashMap<>(pending));
                pending.clear();
            } catch (RebalanceInProgressException e) {
                // Kafka refuses commits mid-rebalance: keep them for the revocation callback or
                // the next poll, as applications are told to.
                Harness.emit("commit_deferred", "consumer", name, "partitions", new ArrayList<>(pendingPartitions()));
            }
        }

        private TreeSet<Integer> pendingPartitions() {
            TreeSet<Integer> ps = new TreeSet<>();
            pending.keySet().forEach(tp -> ps.add(tp.partition()));
            return ps;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            commitPending();
            report("revoked", parts);
            parts.forEach(tp -> owned.remove(tp.partition()));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            parts.forEach(tp -> owned.add(tp.partition()));
            report("assigned", parts);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            report("lost", parts);
            parts.forEach(tp -> owned.remove(tp.partition()));
        }

        private void report(String what, Collection<TopicPartition> parts) {
            List<Integer> ps = new ArrayList<>();
            parts.forEach(tp -> ps.add(tp.partition()));
            ps.sort(null);
            Harness.emit(what, "consumer", name, "partitions", ps, "owned", new ArrayList<>(owned),
                    "generation", consumer.groupMetadata().generationId());
        }

        void close() {
            if (closed) return;
            closed = true;
            consumer.close();
        }
    }
}
