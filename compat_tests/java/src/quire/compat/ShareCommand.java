package quire.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * KafkaShareConsumers (KIP-932) in one share group, each on its own thread, until `count`
 * distinct records were accepted in all or the deadline. Every delivery is printed with its
 * consumer, offset and delivery count.
 *
 * <p>mode=implicit|explicit: the acknowledgement mode. ack=accept|release|reject: what explicit
 * consumers answer (release and reject end without reaching `count`: the run stops after
 * `deliveries` deliveries). hold=true: one consumer, explicit mode, that takes one poll of
 * records, acknowledges nothing and halts the JVM without closing (a crash while holding
 * records). That poll waits until records come (or the deadline): every poll() call lets the
 * client send one more ShareFetch, so after a short empty poll the next one could acquire a
 * second lot of records in the background while the first is being returned, which the
 * consumer would then hold without ever printing them. max_poll=N: max.poll.records.
 * reset=earliest sets the group's share.auto.offset.reset first, share_mode=key_shared its
 * quire.share.mode.
 *
 * <p>Key-shared checks: deliveries carry the key and the wall-clock time ("at"); an explicit-mode
 * consumer prints "acking" just before each commitSync (the records it holds are held at least
 * from their delivery to then), work_ms=N makes it spend N ms per record, and leave_after=N makes
 * the first consumer to reach its N-th non-empty poll close without acknowledging it ("closing"
 * is printed before close(), which returns those records to the others).
 */
final class ShareCommand {
    private ShareCommand() {}

    static void run(Harness.Args a) throws Exception {
        String bootstrap = a.str("bootstrap");
        String group = a.str("group");
        String topic = a.str("topic");
        if (!a.str("reset", "").isEmpty()) setReset(bootstrap, group, a.str("reset"));
        if (!a.str("share_mode", "").isEmpty()) setGroupConfig(bootstrap, group, "quire.share.mode", a.str("share_mode"));
        boolean hold = Boolean.parseBoolean(a.str("hold", "false"));
        int workMs = a.integer("work_ms", 0);
        int leaveAfter = a.integer("leave_after", 0);
        String mode = hold ? "explicit" : a.str("mode", "implicit");
        String ack = a.str("ack", "accept");
        int consumers = hold ? 1 : a.integer("consumers", 1);
        int maxPoll = a.integer("max_poll", 500);
        int count = a.integer("count", 0);
        int deliveries = a.integer("deliveries", Integer.MAX_VALUE);
        long deadline = System.currentTimeMillis() + a.integer("timeout.ms", 60000);
        Set<Long> accepted = ConcurrentHashMap.newKeySet();
        java.util.concurrent.atomic.AtomicInteger delivered = new java.util.concurrent.atomic.AtomicInteger();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicBoolean left = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            String name = "c" + i;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props(bootstrap, group, mode, name, maxPoll))) {
                    c.subscribe(List.of(topic));
                    int polls = 0;
                    while (!stop.get() && System.currentTimeMillis() < deadline) {
                        var records = c.poll(Duration.ofMillis(
                                hold ? Math.max(1, deadline - System.currentTimeMillis()) : 200));
                        boolean leaving = leaveAfter > 0 && !records.isEmpty() && ++polls >= leaveAfter
                                && left.compareAndSet(false, true);
                        for (ConsumerRecord<String, String> r : records) {
                            Harness.emit("delivery", "consumer", name, "partition", r.partition(), "offset", r.offset(),
                                    "key", r.key(), "value", r.value(), "at", System.currentTimeMillis(),
                                    "delivery_count", r.deliveryCount().map(Short::intValue).orElse(-1));
                            delivered.incrementAndGet();
                            if (workMs > 0) Thread.sleep(workMs);
                            if (leaving) continue;
                            if (mode.equals("explicit") && !hold) {
                                c.acknowledge(r, switch (ack) {
                                    case "release" -> AcknowledgeType.RELEASE;
                                    case "reject" -> AcknowledgeType.REJECT;
                                    default -> AcknowledgeType.ACCEPT;
                                });
                            }
                            if (ack.equals("accept")) accepted.add(((long) r.partition() << 40) | r.offset());
                        }
                        if (hold && !records.isEmpty()) {
                            Harness.emit("holding", "consumer", name, "records", records.count());
                            Harness.emit("done");
                            System.out.flush();
                            Runtime.getRuntime().halt(0);
                        }
                        if (leaving) {
                            Harness.emit("closing", "consumer", name);
                            break;
                        }
                        if (mode.equals("explicit") && !records.isEmpty()) {
                            Harness.emit("acking", "consumer", name);
                            c.commitSync();
                        }
                        if ((count > 0 && accepted.size() >= count) || delivered.get() >= deliveries) stop.set(true);
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                    stop.set(true);
                }
            }, name);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) t.join();
        if (!failures.isEmpty()) throw new RuntimeException(failures.get(0));
        Harness.emit("summary", "accepted", accepted.size(), "deliveries", delivered.get());
        if (count > 0 && accepted.size() < count) {
            throw new IllegalStateException("accepted " + accepted.size() + " of " + count + " before the deadline");
        }
    }

    /**
     * Throughput (bench/share_groups.py): `consumers` KafkaShareConsumers (implicit acks) that each
     * spend `work_us` per record, until `count` distinct offsets were delivered (share_mode: the
     * group's quire.share.mode). Prints one
     * "throughput" event: distinct records, deliveries, ms from the first delivery to the last.
     */
    static void bench(Harness.Args a) throws Exception {
        String bootstrap = a.str("bootstrap");
        String group = a.str("group");
        String topic = a.str("topic");
        if (!a.str("reset", "").isEmpty()) setReset(bootstrap, group, a.str("reset"));
        if (!a.str("share_mode", "").isEmpty()) setGroupConfig(bootstrap, group, "quire.share.mode", a.str("share_mode"));
        int consumers = a.integer("consumers", 1);
        int maxPoll = a.integer("max_poll", 500);
        int count = a.integer("count");
        long workNs = a.integer("work_us", 1000) * 1000L;
        long deadline = System.currentTimeMillis() + a.integer("timeout.ms", 600000);
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        // The first delivery of each offset (consumer, delivery count), to describe duplicates.
        Map<Long, String> firstBy = new ConcurrentHashMap<>();
        List<String> duplicates = java.util.Collections.synchronizedList(new ArrayList<>());
        java.util.concurrent.atomic.AtomicInteger delivered = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicLong first = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicLong last = new java.util.concurrent.atomic.AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            String name = "c" + i;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props(bootstrap, group, "implicit", name, maxPoll))) {
                    c.subscribe(List.of(topic));
                    while (!stop.get() && System.currentTimeMillis() < deadline) {
                        var records = c.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : records) {
                            if (stop.get()) break;  // the run is over: what is left is not part of it
                            first.compareAndSet(0, System.nanoTime());
                            // The per-record work: parked, not spinning (the machine is shared).
                            long until = System.nanoTime() + workNs;
                            for (long left = workNs; left > 0; left = until - System.nanoTime()) {
                                java.util.concurrent.locks.LockSupport.parkNanos(left);
                            }
                            delivered.incrementAndGet();
                            String by = name + "#" + r.deliveryCount().map(Short::intValue).orElse(-1) + "@" + System.nanoTime() / 1_000_000;
                            String before = firstBy.putIfAbsent(r.offset(), by);
                            if (before != null && duplicates.size() < 50) duplicates.add(r.offset() + ":" + before + "," + by);
                            if (seen.add(r.offset()) && seen.size() >= count) {
                                last.compareAndSet(0, System.nanoTime());
                                stop.set(true);
                            }
                        }
                    }
                    // Implicit mode acknowledges a poll's records at the next poll: without this,
                    // close would release the last ones processed, to be delivered again.
                    c.commitSync();
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                    stop.set(true);
                }
            }, name);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) t.join();
        if (!failures.isEmpty()) throw new RuntimeException(failures.get(0));
        if (seen.size() < count) throw new IllegalStateException("delivered " + seen.size() + " of " + count + " before the deadline");
        Harness.emit("throughput", "records", seen.size(), "deliveries", delivered.get(),
                "elapsed_ms", (last.get() - first.get()) / 1e6, "duplicates", duplicates);
    }

    /**
     * Ack-to-redelivery latency (bench/share_groups.py): one explicit-mode consumer RELEASEs every
     * first delivery (commitSync sends the acknowledgements) and ACCEPTs the second; for each
     * record, the ms from the RELEASE being sent to the record coming back. `count` records.
     */
    static void redelivery(Harness.Args a) throws Exception {
        String bootstrap = a.str("bootstrap");
        String group = a.str("group");
        String topic = a.str("topic");
        if (!a.str("reset", "").isEmpty()) setReset(bootstrap, group, a.str("reset"));
        int count = a.integer("count");
        long deadline = System.currentTimeMillis() + a.integer("timeout.ms", 120000);
        Map<Long, Long> released = new java.util.HashMap<>();
        List<Double> latencies = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props(bootstrap, group, "explicit", "r", a.integer("max_poll", 10)))) {
            c.subscribe(List.of(topic));
            while (latencies.size() < count && System.currentTimeMillis() < deadline) {
                var records = c.poll(Duration.ofMillis(200));
                long now = System.nanoTime();
                List<Long> fresh = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    Long sent = released.remove(r.offset());
                    if (sent != null) latencies.add((now - sent) / 1e6);
                    if (sent == null && r.deliveryCount().map(Short::intValue).orElse(1) == 1) {
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                        fresh.add(r.offset());
                    } else {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
                long sent = System.nanoTime();
                if (!records.isEmpty()) c.commitSync();
                for (Long o : fresh) released.put(o, sent);
            }
        }
        Harness.emit("redelivery", "latencies_ms", latencies);
    }

    /** The group as Admin sees it: listGroups(type share) and describeShareGroups. */
    static void describe(Harness.Args a) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.str("bootstrap"));
        String group = a.str("group");
        try (Admin admin = Admin.create(p)) {
            Collection<GroupListing> listed = admin.listGroups(
                    new ListGroupsOptions().withTypes(Set.of(GroupType.SHARE))).all().get();
            for (GroupListing g : listed) {
                Harness.emit("listed", "group", g.groupId(), "type", String.valueOf(g.type().orElse(null)),
                        "state", String.valueOf(g.groupState().orElse(null)));
            }
            ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
            List<Map<String, Object>> members = new ArrayList<>();
            d.members().forEach(m -> members.add(Map.of("client_id", m.clientId(),
                    "partitions", m.assignment().topicPartitions().stream().map(tp -> tp.topic() + "-" + tp.partition()).sorted().toList())));
            Harness.emit("described", "group", d.groupId(), "state", String.valueOf(d.groupState()),
                    "members", members);
        }
    }

    static void setReset(String bootstrap, String group, String reset) throws Exception {
        setGroupConfig(bootstrap, group, "share.auto.offset.reset", reset);
    }

    static void setGroupConfig(String bootstrap, String group, String name, String value) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(
                    new ConfigEntry(name, value), AlterConfigOp.OpType.SET)))).all().get();
        }
    }

    static Properties props(String bootstrap, String group, String mode, String clientId, int maxPoll) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, mode);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPoll);
        return p;
    }
}
