/*
 * A cursor reset that a broker restart undoes in part: Apache Pulsar's managed ledger 4.0.7 (on BookKeeper
 * 4.17.2), reproduced from its released jars.
 *
 * ZooKeeper, three bookies and a first broker run as separate JVMs on this machine. The broker opens a managed
 * ledger of at most 3 entries per ledger and a durable cursor, publishes 4 messages (L0:0, L0:1, L0:2, L1:0),
 * acknowledges L0:0, L0:1 and L1:0 one by one, and resets the cursor to read again from L0:1 (resetCursor, which
 * returns once the reset is persisted). The broker is killed with SIGKILL; a second broker (this JVM) opens the
 * managed ledger and the cursor and reads. The reset made L0:1, L0:2 and L1:0 unacknowledged, and it completed
 * before the crash, so the restored cursor must deliver all three; here it skips L1:0.
 *
 * Usage: mvn -q compile exec:exec
 * The JVM exits with status 0 when the restored cursor delivers every message the reset made unacknowledged (the
 * promise kept), 1 when it skips one (the promise broken), 2 when it could not run (it says why); Maven reports 0
 * and 1 as a success. Each JVM logs into the temporary directory printed at the end.
 */

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.mledger.Entry;
import org.apache.bookkeeper.mledger.ManagedCursor;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.Position;
import org.apache.bookkeeper.mledger.impl.ManagedLedgerFactoryImpl;
import org.apache.pulsar.metadata.api.MetadataStoreConfig;
import org.apache.pulsar.metadata.api.extended.MetadataStoreExtended;

public final class ResetRecordKeepsAcks {
    private static final String TOPIC = "reproduction/persistent/reset-record-keeps-acks";
    private static final String SUBSCRIPTION = "subscription";
    private static final int ZK_TICK_MS = 250;
    private static final int BOOKIES = 3;
    private static final String RESET_DONE = "reset done";
    private static final String LOG4J = "<Configuration status=\"ERROR\">\n"
            + "  <Appenders><File name=\"file\" fileName=\"${sys:repro.log}\">\n"
            + "    <PatternLayout pattern=\"%d{HH:mm:ss.SSS} %-5p [%t] %c{1} %m%n\"/></File></Appenders>\n"
            + "  <Loggers><Root level=\"info\"><AppenderRef ref=\"file\"/></Root></Loggers>\n"
            + "</Configuration>\n";

    private final Path dir;
    private final List<Process> processes = new ArrayList<>();
    private String zkAddress;

    private ResetRecordKeepsAcks(Path dir) {
        this.dir = dir;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("first-broker")) {
            firstBroker(args[1]);
            return;
        }
        if (args.length != 0) {
            System.err.println("usage: ResetRecordKeepsAcks (no arguments)");
            System.exit(2);
        }
        Path dir = Files.createTempDirectory("reset-record-keeps-acks-");
        // This JVM's clients log to client.log, as the others do to theirs: set before any class logs.
        Files.writeString(dir.resolve("log4j2.xml"), LOG4J);
        System.setProperty("log4j2.configurationFile", dir.resolve("log4j2.xml").toString());
        System.setProperty("repro.log", dir.resolve("client.log").toString());
        ResetRecordKeepsAcks repro = new ResetRecordKeepsAcks(dir);
        int status;
        try {
            status = repro.run() ? 1 : 0;
        } catch (Exception e) {
            System.out.println("COULD NOT RUN: " + e);
            status = 2;
        } finally {
            repro.stopAll();
        }
        System.out.println("files and logs: " + dir);
        System.exit(status);
    }

    /** The steps; true when the restored cursor skipped a message the reset made unacknowledged. */
    private boolean run() throws Exception {
        int zkPort = freePort();
        zkAddress = "127.0.0.1:" + zkPort;
        Files.createDirectories(dir.resolve("zookeeper"));
        Process zk = spawn("zookeeper", "org.apache.zookeeper.server.ZooKeeperServerMain",
                Integer.toString(zkPort), dir.resolve("zookeeper").toString(), Integer.toString(ZK_TICK_MS));
        waitForPort(zkPort, zk, "ZooKeeper");
        ServerConfiguration init = new ServerConfiguration();
        init.setMetadataServiceUri(metadataUri(zkAddress));
        BookKeeperAdmin.initNewCluster(init);
        for (int i = 0; i < BOOKIES; i++) {
            int port = freePort();
            writeBookieConf(i, port);
            waitForPort(port, spawn("bookie-" + i, "org.apache.bookkeeper.server.Main",
                    "--conf", dir.resolve("bookie-" + i + ".conf").toString()), "bookie " + i);
        }
        waitForBookies();

        Process broker = spawn("first-broker", ResetRecordKeepsAcks.class.getName(), "first-broker", zkAddress);
        List<String> firstSaid = waitForReset(broker);
        for (String line : firstSaid) {
            say("first broker: " + line);
        }
        broker.destroyForcibly(); // SIGKILL: the broker writes nothing more
        broker.waitFor();
        say("killed the first broker (SIGKILL)");

        try (BookKeeper bookKeeper = new BookKeeper(clientConf(zkAddress))) {
            ManagedLedger ml = factory(zkAddress, bookKeeper).open(TOPIC, config());
            ManagedCursor cursor = ml.openCursor(SUBSCRIPTION);
            say("a second broker opened the managed ledger; the cursor's mark-delete is "
                    + cursor.getMarkDeletedPosition());
            List<String> delivered = new ArrayList<>();
            for (int reads = 0; reads < 10 && cursor.hasMoreEntries(); reads++) {
                for (Entry entry : cursor.readEntries(10)) {
                    delivered.add(entry.getPosition().toString());
                    entry.release();
                }
            }
            List<String> published = firstSaid.stream().filter(line -> line.startsWith("published "))
                    .map(line -> line.substring("published ".length())).toList();
            List<String> unacknowledged = published.subList(1, published.size());
            System.out.println("EXPECTED: the restored cursor delivers " + String.join(" ", unacknowledged));
            System.out.println("OBSERVED: it delivers " + (delivered.isEmpty() ? "nothing" : String.join(" ", delivered)));
            return !delivered.containsAll(unacknowledged);
        }
    }

    /** The first broker, in its own JVM: the steps up to the reset, said on its output; then it waits for its kill. */
    private static void firstBroker(String zkAddress) throws Exception {
        BookKeeper bookKeeper = new BookKeeper(clientConf(zkAddress));
        ManagedLedger ml = factory(zkAddress, bookKeeper).open(TOPIC, config());
        ManagedCursor cursor = ml.openCursor(SUBSCRIPTION);
        List<Position> positions = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            positions.add(ml.addEntry(("message " + i).getBytes(StandardCharsets.UTF_8)));
            System.out.println("published " + positions.get(i));
        }
        for (int i : new int[] {0, 1, 3}) {
            cursor.delete(positions.get(i));
            System.out.println("acknowledged " + positions.get(i) + "; mark-delete " + cursor.getMarkDeletedPosition());
        }
        cursor.resetCursor(positions.get(1));
        System.out.println("reset to read from " + positions.get(1) + " (resetCursor returned); mark-delete "
                + cursor.getMarkDeletedPosition());
        System.out.println(RESET_DONE);
        System.out.flush();
        // Until it is killed; should the reproduction die first, this end of its pipe closes.
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        System.exit(0);
    }

    /** The first broker's lines up to the one that says the reset is done. */
    private List<String> waitForReset(Process broker) throws Exception {
        Path output = dir.resolve("first-broker.out");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (System.nanoTime() < deadline) {
            List<String> lines = Files.readAllLines(output);
            if (lines.contains(RESET_DONE)) {
                // Its steps; not SLF4J's warnings about its bindings, which a Maven class path brings about.
                return lines.subList(0, lines.indexOf(RESET_DONE)).stream()
                        .filter(line -> !line.startsWith("SLF4J")).toList();
            }
            if (!broker.isAlive()) {
                throw new IllegalStateException("the first broker exited with " + broker.exitValue() + ": see " + dir);
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("the first broker did not reset the cursor within 120 s: see " + dir);
    }

    // -- the managed ledger ------------------------------------------------------------------
    private static ManagedLedgerFactoryImpl factory(String zkAddress, BookKeeper bookKeeper) throws Exception {
        MetadataStoreExtended store = MetadataStoreExtended.create("zk:" + zkAddress,
                MetadataStoreConfig.builder().build());
        return new ManagedLedgerFactoryImpl(store, bookKeeper);
    }

    /** Ledgers of 3 entries, rolled over at once; the broker's defaults else. */
    private static ManagedLedgerConfig config() {
        ManagedLedgerConfig config = new ManagedLedgerConfig();
        config.setMaxEntriesPerLedger(3);
        config.setMinimumRolloverTime(0, TimeUnit.MILLISECONDS);
        config.setEnsembleSize(3).setWriteQuorumSize(2).setAckQuorumSize(2);
        config.setMetadataEnsembleSize(3).setMetadataWriteQuorumSize(2).setMetadataAckQuorumSize(2);
        return config;
    }

    // -- processes -----------------------------------------------------------------------------
    private static String metadataUri(String zkAddress) {
        return "zk+hierarchical://" + zkAddress + "/ledgers";
    }

    private static ClientConfiguration clientConf(String zkAddress) {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(metadataUri(zkAddress));
        conf.setAddEntryTimeout(5);
        conf.setReadEntryTimeout(5);
        return conf;
    }

    private void writeBookieConf(int i, int port) throws IOException {
        Path home = dir.resolve("bookie-" + i);
        Files.write(dir.resolve("bookie-" + i + ".conf"), List.of(
                "bookiePort=" + port,
                "advertisedAddress=127.0.0.1",
                "allowLoopback=true",
                "journalDirectories=" + home.resolve("journal"),
                "ledgerDirectories=" + home.resolve("ledgers"),
                "metadataServiceUri=" + metadataUri(zkAddress),
                "httpServerEnabled=false",
                "diskUsageThreshold=0.999",
                "diskUsageWarnThreshold=0.998"));
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
        try (BookKeeperAdmin admin = new BookKeeperAdmin(clientConf(zkAddress))) {
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
