/*
 * A BookKeeper cluster on this machine for the stand-alone reproductions: ZooKeeper inside this JVM, each bookie
 * in its own JVM (org.apache.bookkeeper.server.Main), so that kill() is a real crash: SIGKILL, nothing flushed.
 *
 * It needs only the released jars on the class path (bookkeeper-server 4.17.2 and its dependencies; Pulsar's
 * managed-ledger 4.0.7 for the managed-ledger reproduction). See README.md beside it for the commands.
 *
 * The bookies' settings are the ones the recorded scenarios ran with: a short ZooKeeper session, so that a
 * killed bookie's registration expires within seconds, and flushInterval = 1 s, which makes the storages that
 * checkpoint on a timer (DbLedgerStorage, an entry log per ledger) checkpoint every second.
 */

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.server.ServerCnxnFactory;
import org.apache.zookeeper.server.ZooKeeperServer;

final class ReproCluster implements AutoCloseable {
    static final int FLUSH_INTERVAL_MS = 1000;
    static final String LEDGERS_ROOT = "/ledgers";
    private static final int TICK_MS = 250;
    private static final int BOOKIE_SESSION_MS = 1500;
    private static final long WAIT_SECONDS = 60;
    private static final String DB_LEDGER_STORAGE = "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage";

    final Path directory;
    final String zkAddress;
    final String metadataUri;
    private final String storage;
    private final ZooKeeperServer zkServer;
    private final ServerCnxnFactory zkConnections;
    private final ZooKeeper zk;
    private final Process[] bookies;
    private final int[] ports;
    private final List<AutoCloseable> clients = new ArrayList<>();
    private final List<Process> others = new ArrayList<>();

    /**
     * Logging to a file in the cluster's directory, for this JVM and the ones it starts; call it before anything
     * that logs is loaded (the first statement of main).
     */
    static Path prepare(String name) throws IOException {
        String given = System.getProperty("reproduction.dir");
        Path directory = given != null ? Files.createDirectories(Path.of(given))
                : Files.createTempDirectory("reproduction-" + name + "-");
        Path log4j = directory.resolve("log4j2.xml");
        Files.writeString(log4j, "<Configuration status=\"ERROR\"><Appenders>"
                + "<File name=\"file\" fileName=\"${sys:reproduction.log}\"><PatternLayout "
                + "pattern=\"%d{HH:mm:ss.SSS} %-5p [%t] %c{1} %m%n\"/></File></Appenders>"
                + "<Loggers><Root level=\"info\"><AppenderRef ref=\"file\"/></Root></Loggers></Configuration>");
        System.setProperty("log4j2.configurationFile", log4j.toString());
        System.setProperty("reproduction.log", directory.resolve("client.log").toString());
        return directory;
    }

    /** ZooKeeper and {@code count} bookies of {@code storage} ("default" or "db") in {@code directory}, started. */
    ReproCluster(Path directory, String storage, int count) throws Exception {
        if (!storage.equals("default") && !storage.equals("db")) {
            throw new IllegalArgumentException("storage is default or db, not " + storage);
        }
        this.directory = directory;
        this.storage = storage;
        zkServer = new ZooKeeperServer(directory.resolve("zookeeper").toFile(),
                directory.resolve("zookeeper").toFile(), TICK_MS);
        zkConnections = ServerCnxnFactory.createFactory(new InetSocketAddress("127.0.0.1", 0), 100);
        zkConnections.startup(zkServer);
        zkAddress = "127.0.0.1:" + zkConnections.getLocalPort();
        metadataUri = clientConf(zkAddress).getMetadataServiceUri();
        zk = new ZooKeeper(zkAddress, 10_000, event -> { });
        ServerConfiguration format = new ServerConfiguration();
        format.setMetadataServiceUri(metadataUri);
        if (!BookKeeperAdmin.initNewCluster(format)) {
            throw new IllegalStateException("the cluster's metadata could not be formatted at " + metadataUri);
        }
        bookies = new Process[count];
        ports = new int[count];
        for (int i = 0; i < count; i++) {
            try (java.net.ServerSocket socket = new java.net.ServerSocket(0)) {
                ports[i] = socket.getLocalPort();
            }
            writeBookieConf(i);
            restart(i);
        }
        waitForBookies(count);
    }

    private Path bookieConf(int i) {
        return directory.resolve("bookie-" + (i + 1) + ".conf");
    }

    private void writeBookieConf(int i) throws IOException {
        Path home = directory.resolve("bookie-" + (i + 1));
        List<String> lines = new ArrayList<>(List.of(
                "bookiePort=" + ports[i],
                "advertisedAddress=127.0.0.1",
                "allowLoopback=true",
                "journalDirectories=" + home.resolve("journal"),
                "ledgerDirectories=" + home.resolve("ledgers"),
                "metadataServiceUri=" + metadataUri,
                "httpServerEnabled=false",
                "zkTimeout=" + BOOKIE_SESSION_MS,
                "flushInterval=" + FLUSH_INTERVAL_MS,
                // A test machine's disk is often more than 95% full, where a bookie turns read-only.
                "diskUsageThreshold=0.999",
                "diskUsageWarnThreshold=0.998"));
        if (storage.equals("db")) {
            lines.add("ledgerStorageClass=" + DB_LEDGER_STORAGE);
        }
        Files.write(bookieConf(i), lines, StandardCharsets.UTF_8);
    }

    /** A JVM running {@code mainClass} with this JVM's class path, its output in {@code NAME.out}. */
    Process startJava(String name, String mainClass, String... arguments) throws IOException {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx256m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC",
                "-Djava.io.tmpdir=" + Files.createDirectories(directory.resolve("jvm-tmp")),
                "-Dlog4j2.configurationFile=" + directory.resolve("log4j2.xml"),
                "-Dreproduction.log=" + directory.resolve(name + ".log"),
                "-cp", System.getProperty("java.class.path"),
                mainClass));
        command.addAll(List.of(arguments));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.redirectOutput(ProcessBuilder.Redirect.appendTo(directory.resolve(name + ".out").toFile()));
        return builder.start();
    }

    /** Bookie {@code i} (from 0) on its directories, as they are; the caller waits for it to register. */
    void restart(int i) throws IOException {
        if (bookies[i] != null && bookies[i].isAlive()) {
            throw new IllegalStateException("bookie " + bookieId(i) + " is running");
        }
        bookies[i] = startJava("bookie-" + (i + 1), "org.apache.bookkeeper.server.Main",
                "--conf", bookieConf(i).toString());
    }

    /** SIGKILL the bookies (from 0), then wait until their registrations have expired, so that each restart
     * registers anew. */
    void kill(int... indexes) throws Exception {
        for (int i : indexes) {
            bookies[i].destroyForcibly().waitFor();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        for (int i : indexes) {
            while (zk.exists(LEDGERS_ROOT + "/available/" + bookieId(i), false) != null) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the registration of killed bookie " + bookieId(i) + " stays");
                }
                Thread.sleep(50);
            }
        }
    }

    String bookieId(int i) {
        return "127.0.0.1:" + ports[i];
    }

    /** Wait until {@code count} bookies are registered as available. */
    void waitForBookies(int count) throws Exception {
        try (BookKeeperAdmin admin = new BookKeeperAdmin(clientConf())) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
            Collection<BookieId> available = admin.getAvailableBookies();
            while (available.size() < count) {
                for (int i = 0; i < bookies.length; i++) {
                    if (!bookies[i].isAlive()) {
                        throw new IllegalStateException("bookie " + bookieId(i) + " exited: see "
                                + directory.resolve("bookie-" + (i + 1) + ".log"));
                    }
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(available.size() + " bookies registered of " + count);
                }
                Thread.sleep(100);
                available = admin.getAvailableBookies();
            }
        }
    }

    ClientConfiguration clientConf() {
        return clientConf(zkAddress);
    }

    /** A BookKeeper client's configuration for the cluster whose ZooKeeper is at {@code zkAddress}. */
    static ClientConfiguration clientConf(String zkAddress) {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri("zk+hierarchical://" + zkAddress + LEDGERS_ROOT);
        conf.setAddEntryTimeout(5);
        conf.setReadEntryTimeout(5);
        conf.setZkTimeout(10_000);
        return conf;
    }

    /** A new BookKeeper client of the cluster, closed with it. */
    BookKeeper client() throws Exception {
        BookKeeper bk = new BookKeeper(clientConf());
        clients.add(bk);
        return bk;
    }

    /** A JVM the cluster stops with it, for a reproduction that runs part of itself in another process. */
    void track(Process process) {
        others.add(process);
    }

    @Override
    public void close() throws Exception {
        for (AutoCloseable client : clients) {
            try {
                client.close();
            } catch (Exception e) {
                // A client of killed bookies may fail to close cleanly; the processes stop below all the same.
            }
        }
        for (Process process : others) {
            process.destroyForcibly().waitFor();
        }
        for (Process bookie : bookies) {
            if (bookie != null) {
                bookie.destroyForcibly().waitFor();
            }
        }
        zk.close();
        zkConnections.shutdown();
        zkServer.shutdown();
        if (System.getProperty("reproduction.dir") == null) {
            try (Stream<Path> paths = Files.walk(directory)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> {
                    try {
                        Files.delete(p);
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                });
            }
        }
    }

    /** The reproduction's verdict, in the form every one of them prints, and its exit status (1: reproduced). */
    static int report(String expected, String observed, boolean reproduced) {
        System.out.println("EXPECTED: " + expected);
        System.out.println("OBSERVED: " + observed);
        System.out.println(reproduced ? "REPRODUCED" : "NOT REPRODUCED: the released jars behave as expected");
        return reproduced ? 1 : 0;
    }

    static void step(String what) {
        System.out.println("- " + what);
    }
}
