/*
 * A cursor reset back persists the individual acks from before the reset, and a broker restart skips the
 * messages the reset was to deliver again: Apache Pulsar's managed ledger 4.0.7 (on BookKeeper 4.17.2).
 *
 *   java ResetRecordKeepsAcks
 *
 * Steps: a broker (its own JVM) opens a managed ledger of at most 3 entries per ledger and a durable cursor,
 * publishes 4 messages (positions L0:0, L0:1, L0:2, L1:0), acknowledges L0:0, L0:1 and L1:0 one by one, and
 * resets the cursor to read again from L0:1 (resetCursor, which returns once the reset is persisted). The broker
 * is then killed with SIGKILL, and a new broker opens the managed ledger and the cursor and reads.
 *
 * Expected: the restored cursor delivers L0:1, L0:2 and L1:0 again: the reset made them unacknowledged, and the
 * reset completed before the crash.
 * Observed: it delivers L0:1 and L0:2 only; L1:0, which the consumer acknowledged before the reset, is skipped.
 *
 * Why (managed-ledger 4.0.7, ManagedCursorImpl): internalResetCursor persists the reset's mark-delete through
 * internalAsyncMarkDelete, and the record it writes (persistPositionToLedger, buildIndividualDeletedMessageRanges)
 * takes the individually deleted messages as they are in memory: the ones acknowledged before the reset. The
 * reset clears them only in its callback, after the record is written; until the cursor is persisted again, a
 * restore takes the reset's mark-delete with the old acks.
 *
 * Exit status: 1 when the behaviour above is reproduced, 0 when the released jars behave as expected, 2 when the
 * reproduction could not run.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.mledger.Entry;
import org.apache.bookkeeper.mledger.ManagedCursor;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.ManagedLedgerFactory;
import org.apache.bookkeeper.mledger.Position;
import org.apache.bookkeeper.mledger.impl.ManagedLedgerFactoryImpl;
import org.apache.pulsar.metadata.api.MetadataStoreConfig;
import org.apache.pulsar.metadata.api.extended.MetadataStoreExtended;

public final class ResetRecordKeepsAcks {
    private static final String TOPIC = "reproduction/persistent/reset-record-keeps-acks";
    private static final String SUBSCRIPTION = "subscription";
    private static final int BOOKIES = 3;
    private static final String RESET_DONE = "reset done";

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("broker")) {
            firstBroker(args[1]);
            return;
        }
        Path directory = ReproCluster.prepare("reset-record-keeps-acks");
        int status;
        try (ReproCluster cluster = new ReproCluster(directory, "default", BOOKIES)) {
            status = run(cluster);
        } catch (Exception e) {
            System.out.println("COULD NOT RUN: " + e + " (logs in " + directory + ")");
            status = 2;
        }
        System.exit(status);
    }

    private static int run(ReproCluster cluster) throws Exception {
        System.out.println("Reproduction: a cursor reset back keeps the acks from before it across a broker crash, "
                + BOOKIES + " bookies in " + cluster.directory);
        Process broker = cluster.startJava("broker", ResetRecordKeepsAcks.class.getName(), "broker",
                cluster.zkAddress);
        cluster.track(broker);
        waitFor(broker, cluster.directory.resolve("broker.out"));
        ReproCluster.step("the first broker published L0:0 L0:1 L0:2 L1:0, acknowledged L0:0 L0:1 L1:0, and reset "
                + "the cursor to read again from L0:1 (resetCursor returned)");
        broker.destroyForcibly().waitFor();
        ReproCluster.step("the first broker was killed (SIGKILL)");
        ManagedLedger ml = factory(cluster.zkAddress, cluster.client()).open(TOPIC, config());
        ManagedCursor cursor = ml.openCursor(SUBSCRIPTION);
        ReproCluster.step("a second broker opened the managed ledger and the cursor: mark-delete "
                + cursor.getMarkDeletedPosition());
        List<String> delivered = new ArrayList<>();
        for (int reads = 0; reads < 10 && cursor.hasMoreEntries(); reads++) {
            for (Entry entry : cursor.readEntries(10)) {
                delivered.add(entry.getPosition().toString());
                entry.release();
            }
        }
        List<String> published = Files.readAllLines(cluster.directory.resolve("broker.out")).stream()
                .filter(line -> line.startsWith("published ")).map(line -> line.substring(10)).toList();
        List<String> expected = published.subList(1, published.size());
        boolean reproduced = !delivered.containsAll(expected);
        return ReproCluster.report("the restored cursor delivers " + String.join(" ", expected),
                "it delivers " + (delivered.isEmpty() ? "nothing" : String.join(" ", delivered)), reproduced);
    }

    /** Wait until the first broker says the reset is done; its output, logged, says what it did. */
    private static void waitFor(Process broker, Path output) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (System.nanoTime() < deadline) {
            if (Files.readAllLines(output).contains(RESET_DONE)) {
                return;
            }
            if (!broker.isAlive()) {
                throw new IllegalStateException("the first broker exited: see " + output);
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("the first broker did not finish within 120 s: see " + output);
    }

    /** The first broker, in its own JVM: the steps up to the reset; then it waits to be killed. */
    private static void firstBroker(String zkAddress) throws Exception {
        BookKeeper bookKeeper = new BookKeeper(ReproCluster.clientConf(zkAddress));
        ManagedLedger ml = factory(zkAddress, bookKeeper).open(TOPIC, config());
        ManagedCursor cursor = ml.openCursor(SUBSCRIPTION);
        List<Position> positions = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            positions.add(ml.addEntry(("message " + i).getBytes(StandardCharsets.UTF_8)));
            System.out.println("published " + positions.get(i));
        }
        for (int i : new int[] {0, 1, 3}) {
            cursor.delete(positions.get(i));
            System.out.println("acknowledged " + positions.get(i) + ", mark-delete " + cursor.getMarkDeletedPosition());
        }
        cursor.resetCursor(positions.get(1));
        System.out.println("reset to " + positions.get(1) + ", mark-delete " + cursor.getMarkDeletedPosition());
        System.out.println(RESET_DONE);
        System.out.flush();
        // Until the reproduction kills it; should the reproduction itself die first, its end of stdin closes.
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        System.exit(0);
    }

    private static ManagedLedgerFactory factory(String zkAddress, BookKeeper bookKeeper) throws Exception {
        MetadataStoreExtended store = MetadataStoreExtended.create("zk:" + zkAddress,
                MetadataStoreConfig.builder().build());
        return new ManagedLedgerFactoryImpl(store, bookKeeper);
    }

    /** The managed ledger's configuration: ledgers of 3 entries, rolled over at once; the broker's defaults else. */
    private static ManagedLedgerConfig config() {
        ManagedLedgerConfig config = new ManagedLedgerConfig();
        config.setMaxEntriesPerLedger(3);
        config.setMinimumRolloverTime(0, TimeUnit.MILLISECONDS);
        config.setEnsembleSize(3).setWriteQuorumSize(2).setAckQuorumSize(2);
        config.setMetadataEnsembleSize(3).setMetadataWriteQuorumSize(2).setMetadataAckQuorumSize(2);
        config.setThrottleMarkDelete(0);
        return config;
    }
}
