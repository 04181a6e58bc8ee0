/*
 * A bookie forgets the fence of a ledger it holds no entry of, when it crashes: Apache BookKeeper 4.17.2.
 *
 *   java FenceOfEmptyLedgerLost default   the default ledger storage (SortedLedgerStorage): the crash comes before
 *                                         any checkpoint, and the journal replay skips the fence record
 *   java FenceOfEmptyLedgerLost db        DbLedgerStorage: a checkpoint moves the lastMark past the fence record
 *                                         without writing the ledger's fenced state
 *
 * Steps: a writer creates a ledger (E=3, Qw=3, Qa=2) and adds nothing; a second client opens it for recovery,
 * which fences it on every bookie and closes it empty (last entry -1). Three seconds later (three flushIntervals)
 * all three bookies are killed with SIGKILL and restarted on their files. The writer, which still holds the
 * ledger open, adds an entry.
 *
 * Expected: the add fails with BKLedgerFencedException; a fenced ledger stays fenced across a bookie restart
 * (the fence is journaled: BookieImpl.fenceLedger).
 * Observed: the add is acknowledged, as entry 0, by a ledger that its metadata says is closed with no entry: an
 * acknowledged entry that no reader will ever see.
 *
 * Why (bookkeeper-server, release-4.17.2): BookieImpl.fenceLedger journals a fence record but no ledger-key
 * record (only a first add journals one, addEntryInternal). With the default storage, the replay after the
 * crash (BookieImpl.readJournal) looks the fence record's master key up in the ledger storage, finds no index
 * file (IndexPersistenceMgr.readMasterKey: NoLedgerException), and skips the record as that of a deleted ledger;
 * the flush after the replay then moves the lastMark past it. With DbLedgerStorage the fence is a change queued in
 * LedgerMetadataIndex, and a checkpoint with an empty write cache returns before flushing it
 * (SingleDirectoryDbLedgerStorage.checkpoint) while the SyncThread still moves the lastMark past the fence
 * record (apache/bookkeeper PR #4843).
 *
 * Exit status: 1 when the behaviour above is reproduced, 0 when the released jars behave as expected, 2 when the
 * reproduction could not run.
 */

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;

public final class FenceOfEmptyLedgerLost {
    private static final byte[] PASSWORD = "reproduction".getBytes(StandardCharsets.UTF_8);
    private static final int BOOKIES = 3;

    public static void main(String[] args) throws Exception {
        String storage = args.length > 0 ? args[0] : "default";
        if (args.length > 1 || !(storage.equals("default") || storage.equals("db"))) {
            System.out.println("usage: FenceOfEmptyLedgerLost [default|db]: the bookies' ledger storage");
            System.exit(2);
        }
        Path directory = ReproCluster.prepare("fence-of-empty-ledger");
        int status;
        try (ReproCluster cluster = new ReproCluster(directory, storage, BOOKIES)) {
            status = run(cluster, storage);
        } catch (Exception e) {
            System.out.println("COULD NOT RUN: " + e + " (logs in " + directory + ")");
            status = 2;
        }
        System.exit(status);
    }

    private static int run(ReproCluster cluster, String storage) throws Exception {
        System.out.println("Reproduction: a bookie forgets the fence of a ledger it holds no entry of, "
                + "storage " + storage + ", " + BOOKIES + " bookies in " + cluster.directory);
        BookKeeper writerClient = cluster.client();
        LedgerHandle writer = writerClient.createLedger(3, 3, 2, DigestType.CRC32C, PASSWORD);
        long ledger = writer.getId();
        ReproCluster.step("the writer created ledger " + ledger + " (E=3, Qw=3, Qa=2) and adds nothing");
        LedgerHandle recovered = cluster.client().openLedger(ledger, DigestType.CRC32C, PASSWORD);
        ReproCluster.step("a second client recovered it: fenced, closed with last entry "
                + recovered.getLastAddConfirmed());
        Thread.sleep(3L * ReproCluster.FLUSH_INTERVAL_MS);
        cluster.kill(0, 1, 2);
        ReproCluster.step("three seconds later all " + BOOKIES + " bookies were killed (SIGKILL)");
        for (int i = 0; i < BOOKIES; i++) {
            cluster.restart(i);
        }
        cluster.waitForBookies(BOOKIES);
        ReproCluster.step("and restarted on their files");
        String observed;
        boolean reproduced;
        try {
            long entry = writer.addEntry("after the recovery".getBytes(StandardCharsets.UTF_8));
            LedgerHandle reader = cluster.client().openLedgerNoRecovery(ledger, DigestType.CRC32C, PASSWORD);
            long last = reader.getLastAddConfirmed();
            reproduced = last < entry;
            observed = "the add was acknowledged as entry " + entry + "; the ledger's metadata says "
                    + (reader.isClosed() ? "closed" : "open") + " with last entry " + last
                    + (reproduced ? ", so no reader sees the acknowledged entry" : "");
        } catch (BKException.BKLedgerFencedException e) {
            observed = "the add failed: " + e.getMessage();
            reproduced = false;
        }
        return ReproCluster.report("the writer's add fails with BKLedgerFencedException", observed, reproduced);
    }
}
