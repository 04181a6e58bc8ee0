/*
 * A fence that a bookie forgets: Apache BookKeeper 4.17.2, reproduced from its released jars.
 *
 * ZooKeeper and three bookies run as separate JVMs on this machine. A writer creates a ledger (E=3, Qw=3, Qa=2)
 * and adds nothing; a second client opens it with recovery, which fences the three bookies and closes the ledger at
 * entry -1. The three bookies are killed with SIGKILL and started again. Then the writer, which still holds its
 * handle, adds entry 0. BookKeeper promises that a fenced ledger takes no more adds from the old writer (the add
 * must fail with LedgerFencedException); here, with the default ledger storage, the add is acknowledged, although
 * the ledger is closed at -1: an acknowledged entry that no reader will ever see.
 *
 * Usage: mvn -q compile exec:exec [-Dvariant=default|checkpoint|db]
 *   default     SortedLedgerStorage, no checkpoint before the crash: the add is acknowledged (the bug)
 *   checkpoint  entryLogPerLedgerEnabled=true, so that a checkpoint runs every flushInterval (1 s): the index
 *               header with the fence bit is on disk before the crash, and the add is refused
 *   db          DbLedgerStorage: the add is acknowledged (the same outcome by another route, apache/bookkeeper#4843)
 * The JVM exits with status 0 when the add was refused (the promise kept), 1 when it was acknowledged (the promise
 * broken), 2 when it could not run (it says why); Maven reports 0 and 1 as a success. Each JVM logs into the
 * temporary directory printed at the end.
 */

import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.conf.ServerConfiguration;

public final class FenceOfEmptyLedger {
    private static final byte[] PASSWORD = "password".getBytes(StandardCharsets.UTF_8);
    private static final int ZK_TICK_MS = 250;
    private static final int BOOKIE_SESSION_MS = 1500;
    private static final int BOOKIES = 3;
    private static final String LOG4J = "<Configuration status=\"ERROR\">\n"
            + "  <Appenders><File name=\"file\" fileName=\"${sys:repro.log}\">\n"
            + "    <PatternLayout pattern=\"%d{HH:mm:ss.SSS} %-5p [%t] %c{1} %m%n\"/></File></Appenders>\n"
            + "  <Loggers>\n"
            // The journal replay logs each record it replays, and each it skips, at DEBUG.
            + "    <Logger name=\"org.apache.bookkeeper.bookie.Bookie\" level=\"debug\"/>\n"
            + "    <Root level=\"info\"><AppenderRef ref=\"file\"/></Root>\n"
            + "  </Loggers>\n"
            + "</Configuration>\n";

    private final Path dir;
    private final List<String> storage;
    private final List<Process> processes = new ArrayList<>();
    private final Process[] bookies = new Process[BOOKIES];
    private final int[] bookiePorts = new int[BOOKIES];
    private String metadataUri;

    private FenceOfEmptyLedger(Path dir, List<String> storage) {
        this.dir = dir;
        this.storage = storage;
    }

    public static void main(String[] args) throws Exception {
        String variant = args.length > 0 ? args[0] : "default";
        List<String> storage;
        switch (variant) {
            case "default":
                storage = List.of();
                break;
            case "checkpoint":
                storage = List.of("entryLogPerLedgerEnabled=true");
                break;
            case "db":
                storage = List.of("ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage");
                break;
            default:
                System.err.println("usage: FenceOfEmptyLedger [default|checkpoint|db]; got " + variant);
                System.exit(2);
                return;
        }
        Path dir = Files.createTempDirectory("fence-of-empty-ledger-");
        // This JVM's clients log to client.log, as the others do to theirs: set before any class logs.
        Files.writeString(dir.resolve("log4j2.xml"), LOG4J);
        System.setProperty("log4j2.configurationFile", dir.resolve("log4j2.xml").toString());
        System.setProperty("repro.log", dir.resolve("client.log").toString());
        FenceOfEmptyLedger repro = new FenceOfEmptyLedger(dir, storage);
        int status;
        try {
            status = repro.run(variant) ? 1 : 0;
        } catch (Exception e) {
            System.out.println("COULD NOT RUN: " + e);
            status = 2;
        } finally {
            repro.stopAll();
        }
        System.out.println("files and logs: " + dir);
        System.exit(status);
    }

    private boolean run(String variant) throws Exception {
        int zkPort = freePort();
        metadataUri = "zk+hierarchical://127.0.0.1:" + zkPort + "/ledgers";
        Files.createDirectories(dir.resolve("zookeeper"));
        Process zk = spawn("zookeeper", "org.apache.zookeeper.server.ZooKeeperServerMain",
                Integer.toString(zkPort), dir.resolve("zookeeper").toString(), Integer.toString(ZK_TICK_MS));
        waitForPort(zkPort, zk, "ZooKeeper");
        ServerConfiguration init = new ServerConfiguration();
        init.setMetadataServiceUri(metadataUri);
        BookKeeperAdmin.initNewCluster(init);
        for (int i = 0; i < BOOKIES; i++) {
            bookiePorts[i] = freePort();
            writeBookieConf(i);
            startBookie(i);
        }
        waitForBookies();

        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(metadataUri);
        conf.setAddEntryTimeout(5);
        conf.setReadEntryTimeout(5);
        try (BookKeeper writer = new BookKeeper(conf); BookKeeper recoverer = new BookKeeper(conf)) {
            LedgerHandle handle = writer.createLedger(3, 3, 2, BookKeeper.DigestType.CRC32C, PASSWORD);
            long ledger = handle.getId();
            say("variant " + variant + ": the writer created ledger " + ledger + " (E=3 Qw=3 Qa=2) and adds nothing");
            LedgerHandle recovered = recoverer.openLedger(ledger, BookKeeper.DigestType.CRC32C, PASSWORD);
            say("a second client recovered it: " + describe(recovered.getLedgerMetadata()));
            // Three checkpoint intervals: the checkpoint and db variants checkpoint meanwhile, the default one not.
            Thread.sleep(3000);
            for (int i = 0; i < BOOKIES; i++) {
                say("bookie " + (i + 1) + " before the kill: " + files(i, ledger));
            }
            for (int i = 0; i < BOOKIES; i++) {
                bookies[i].destroyForcibly(); // SIGKILL: the bookie flushes nothing
                bookies[i].waitFor();
            }
            say("killed the three bookies (SIGKILL)");
            Thread.sleep(2L * BOOKIE_SESSION_MS); // their registrations expire, so that the restarts register at once
            for (int i = 0; i < BOOKIES; i++) {
                startBookie(i);
            }
            waitForBookies();
            say("restarted them");
            for (int i = 0; i < BOOKIES; i++) {
                for (String line : replayLines(i, ledger)) {
                    say("bookie " + (i + 1) + " log: " + line);
                }
                say("bookie " + (i + 1) + " after the restart: " + files(i, ledger));
            }
            String observed;
            boolean acknowledged;
            try {
                long entry = handle.addEntry("entry 0".getBytes(StandardCharsets.UTF_8));
                observed = "the old writer's add was acknowledged as entry " + entry;
                acknowledged = true;
            } catch (BKException e) {
                observed = "the old writer's add failed: " + e.getClass().getSimpleName() + " (" + e.getMessage() + ")";
                acknowledged = false;
            }
            LedgerMetadata after = recoverer.getLedgerManager().readLedgerMetadata(ledger)
                    .get(30, TimeUnit.SECONDS).getValue();
            say("the ledger in ZooKeeper: " + describe(after));
            System.out.println("EXPECTED: the old writer's add fails with LedgerFencedException: the ledger was fenced "
                    + "and closed at -1");
            System.out.println("OBSERVED: " + observed);
            return acknowledged;
        }
    }

    private static String describe(LedgerMetadata m) {
        return m.getState() + ", lastEntryId " + m.getLastEntryId();
    }

    // -- the bookies' files ----------------------------------------------------------------
    private Path ledgerDir(int i) {
        return dir.resolve("bookie-" + i).resolve("ledgers").resolve("current");
    }

    /** The bookie's lastMark, and the ledger's index file (default storages only) with its fence bit. */
    private String files(int i, long ledger) throws IOException {
        Path lastMark = ledgerDir(i).resolve("lastMark");
        String mark = "lastMark none";
        if (Files.exists(lastMark)) {
            try (RandomAccessFile f = new RandomAccessFile(lastMark.toFile(), "r")) {
                mark = "lastMark (" + f.readLong() + ", " + f.readLong() + ")";
            }
        }
        if (storage.stream().anyMatch(s -> s.startsWith("ledgerStorageClass="))) {
            return mark + "; the ledger index is in RocksDB (not read here)";
        }
        long count;
        try (Stream<Path> all = Files.walk(ledgerDir(i))) {
            count = all.filter(p -> p.toString().endsWith(".idx")).count();
        }
        Path index = ledgerDir(i).resolve(Long.toHexString((ledger >> 8) & 0xff))
                .resolve(Long.toHexString(ledger & 0xff)).resolve(Long.toHexString(ledger) + ".idx");
        if (!Files.exists(index)) {
            return mark + "; " + count + " index files, none of ledger " + ledger;
        }
        try (RandomAccessFile f = new RandomAccessFile(index.toFile(), "r")) {
            f.readInt(); // "BKLE"
            f.readInt(); // header version
            f.skipBytes(f.readInt()); // master key
            boolean fenced = (f.readInt() & 1) != 0; // FileInfo.STATE_FENCED_BIT
            return mark + "; index file of ledger " + ledger + (fenced ? " says fenced" : " does not say fenced");
        }
    }

    /** The lines of bookie i's log (all its runs) in which its journal replay names the ledger, or skips it. */
    private List<String> replayLines(int i, long ledger) throws IOException {
        List<String> kept = new ArrayList<>();
        for (String line : Files.readAllLines(dir.resolve("bookie-" + i + ".log"))) {
            if (line.contains("Replay journal - ledger id : " + ledger + ",")
                    || line.contains("Skip replaying entries of ledger " + ledger + " ")
                    || line.contains("Replaying journal ")) {
                kept.add(line);
            }
        }
        return kept;
    }

    // -- processes -----------------------------------------------------------------------------
    private void writeBookieConf(int i) throws IOException {
        Path home = dir.resolve("bookie-" + i);
        List<String> lines = new ArrayList<>(List.of(
                "bookiePort=" + bookiePorts[i],
                "advertisedAddress=127.0.0.1",
                "allowLoopback=true",
                "journalDirectories=" + home.resolve("journal"),
                "ledgerDirectories=" + home.resolve("ledgers"),
                "metadataServiceUri=" + metadataUri,
                "httpServerEnabled=false",
                "zkTimeout=" + BOOKIE_SESSION_MS,
                "flushInterval=1000",
                "diskUsageThreshold=0.999",
                "diskUsageWarnThreshold=0.998"));
        lines.addAll(storage);
        Files.write(dir.resolve("bookie-" + i + ".conf"), lines);
    }

    private void startBookie(int i) throws Exception {
        bookies[i] = spawn("bookie-" + i, "org.apache.bookkeeper.server.Main",
                "--conf", dir.resolve("bookie-" + i + ".conf").toString());
        waitForPort(bookiePorts[i], bookies[i], "bookie " + i);
    }

    private Process spawn(String name, String mainClass, String... args) throws IOException {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx256m", "-XX:MaxDirectMemorySize=256m",
                // RocksDB and the checksum library unpack native libraries there, which a killed JVM leaves.
                "-Djava.io.tmpdir=" + Files.createDirectories(dir.resolve("jvm-tmp")),
                "-Dlog4j2.configurationFile=" + dir.resolve("log4j2.xml"),
                "-Drepro.log=" + dir.resolve(name + ".log"),
                "-Dzookeeper.admin.enableServer=false",
                "-cp", System.getProperty("java.class.path"),
                mainClass));
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve(name + ".out").toFile()))
                .start();
        processes.add(p);
        return p;
    }

    private void waitForPort(int port, Process process, String what) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IllegalStateException(what + " exited with " + process.exitValue() + ": see " + dir);
            }
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 500);
                return;
            } catch (IOException notYet) {
                Thread.sleep(50);
            }
        }
        throw new IllegalStateException(what + " did not listen on port " + port + " within 60 s: see " + dir);
    }

    private void waitForBookies() throws Exception {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(metadataUri);
        try (BookKeeperAdmin admin = new BookKeeperAdmin(conf)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (admin.getAvailableBookies().size() < BOOKIES) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the bookies did not register within 60 s: see " + dir);
                }
                Thread.sleep(100);
            }
        }
    }

    private void stopAll() {
        for (Process p : processes) {
            p.destroyForcibly();
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static void say(String line) {
        System.out.println("  " + line);
    }
}
