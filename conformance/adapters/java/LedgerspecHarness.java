/*
 * Drives Apache BookKeeper clients for ledgerspec and reports what they see.
 *
 * Commands arrive on stdin, one JSON object a line; every line written to
 * stdout is a JSON object: a reply to a command ({"reply": id, ...}) or an
 * observation ({"obs": n, "ev": ...}), numbered in the order this process saw
 * them. Observations come from two places inside each client, so that they
 * are the client's own view and nothing else:
 *
 *   - its BookieClient: every request sent to a bookie ("send") and every
 *     reply that reaches the client ("reply"), before the client acts on it;
 *   - its LedgerManager: every ledger metadata create or compare-and-set
 *     write, with its outcome ("metadata"), before the client acts on it.
 *
 * A plain reader's handle also reports the LAC it learned: at its open
 * ("opened") and at each read of the LAC ("lac-read").
 *
 * Both are interfaces; the client's own instances are wrapped in place. The
 * harness turns nothing into spec events: the adapter in Python does that.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.client.BookieWatcher;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerEntries;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.meta.LedgerManager;
import org.apache.bookkeeper.mledger.Entry;
import org.apache.bookkeeper.mledger.ManagedCursor;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.ManagedLedgerException;
import org.apache.bookkeeper.mledger.ManagedLedgerFactory;
import org.apache.bookkeeper.mledger.Position;
import org.apache.bookkeeper.mledger.PositionFactory;
import org.apache.bookkeeper.mledger.impl.ManagedLedgerFactoryImpl;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.proto.BookieClient;
import org.apache.bookkeeper.proto.BookkeeperInternalCallbacks.ReadEntryCallback;
import org.apache.bookkeeper.proto.ReadLastConfirmedAndEntryContext;
import org.apache.bookkeeper.proto.BookkeeperInternalCallbacks.WriteCallback;
import org.apache.bookkeeper.proto.BookkeeperInternalCallbacks.WriteLacCallback;
import org.apache.bookkeeper.util.AvailabilityOfEntriesOfLedger;
import org.apache.bookkeeper.util.ByteBufList;
import org.apache.bookkeeper.versioning.LongVersion;
import org.apache.bookkeeper.versioning.Version;
import org.apache.bookkeeper.versioning.Versioned;
import org.apache.pulsar.metadata.api.MetadataStoreConfig;
import org.apache.pulsar.metadata.api.extended.MetadataStoreExtended;

public final class LedgerspecHarness {
    private static final byte[] PASSWORD = "ledgerspec".getBytes(StandardCharsets.UTF_8);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static final long WAIT_SECONDS = 60;

    private final String metadataUri;
    private final Map<Integer, BookKeeper> clients = new ConcurrentHashMap<>();
    /** explicitLacInterval (ms) of each client configured with one before its first use. */
    private final Map<Integer, Integer> explicitLacIntervals = new ConcurrentHashMap<>();
    /** (client, ledger) -> the handle the client holds; its LAC is reported after each reply. */
    private final Map<String, LedgerHandle> handles = new ConcurrentHashMap<>();
    /** (client, ledger) -> adds issued whose callback has not come. */
    private final Map<String, List<CompletableFuture<Integer>>> pendingAdds = new ConcurrentHashMap<>();
    /** (client, ledger) -> entries added so far: entry n's data is "entry n of ledger L". */
    private final Map<String, Long> added = new ConcurrentHashMap<>();
    private final java.util.concurrent.atomic.AtomicLong observations = new java.util.concurrent.atomic.AtomicLong();

    private LedgerspecHarness(String metadataUri) {
        this.metadataUri = metadataUri;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: LedgerspecHarness zk+hierarchical://HOST:PORT/ledgers");
            System.exit(2);
        }
        LedgerspecHarness harness = new LedgerspecHarness(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode command = JSON.readTree(line);
            Map<String, Object> reply = new LinkedHashMap<>();
            reply.put("reply", command.path("id").asLong());
            try {
                if (!harness.run(command, reply)) {
                    harness.emit(reply);
                    break;
                }
            } catch (Exception e) {
                reply.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            harness.emit(reply);
        }
        for (BookKeeper bk : harness.clients.values()) {
            bk.close();
        }
        OUT.flush();
        System.exit(0);
    }

    private synchronized void emit(Map<String, Object> line) {
        try {
            OUT.println(JSON.writeValueAsString(line));
            OUT.flush();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Report an observation. Its number is taken here, before the lock that orders the output: a thread that
     * waits for that lock would otherwise get a number later than events that happened after its own.
     * Lines may thus reach stdout slightly out of order; the reader sorts them by number.
     */
    private void observe(Map<String, Object> event) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("obs", observations.getAndIncrement());
        line.putAll(event);
        emit(line);
    }

    private static String key(int client, long ledger) {
        return client + "/" + ledger;
    }

    /** An entry's bytes: its text, then as many '.' as make it {@code size} bytes (none when it is longer). */
    private static byte[] padded(String text, int size) {
        byte[] head = text.getBytes(StandardCharsets.UTF_8);
        if (size <= head.length) {
            return head;
        }
        byte[] data = Arrays.copyOf(head, size);
        Arrays.fill(data, head.length, size, (byte) '.');
        return data;
    }

    /** An entry's text, without the padding {@link #padded} added (no text ends with '.'). */
    private static String unpadded(byte[] data) {
        int end = data.length;
        while (end > 0 && data[end - 1] == '.') {
            end--;
        }
        return new String(data, 0, end, StandardCharsets.UTF_8);
    }

    // -- commands ------------------------------------------------------------------------
    private boolean run(JsonNode c, Map<String, Object> reply) throws Exception {
        String cmd = c.path("cmd").asText();
        int client = c.path("client").asInt(0);
        long ledger = c.path("ledger").asLong(-1);
        switch (cmd) {
            case "init-cluster": {
                ServerConfiguration conf = new ServerConfiguration();
                conf.setMetadataServiceUri(metadataUri);
                reply.put("initialized", BookKeeperAdmin.initNewCluster(conf));
                return true;
            }
            case "bookies": {
                try (BookKeeperAdmin admin = new BookKeeperAdmin(clientConf())) {
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
                    int wanted = c.path("wait_for").asInt(0);
                    // at_most: also wait until no more are registered, and no client sees more (a stopped bookie's
                    // registration goes with its session; a client's view follows it by a watch)
                    int atMost = c.path("at_most").asInt(Integer.MAX_VALUE);
                    Collection<BookieId> available = admin.getAvailableBookies();
                    while ((available.size() < wanted || available.size() > atMost)
                            && System.nanoTime() < deadline) {
                        Thread.sleep(100);
                        available = admin.getAvailableBookies();
                    }
                    List<String> ids = new ArrayList<>();
                    available.forEach(b -> ids.add(b.toString()));
                    reply.put("bookies", ids);
                    // A bookie that restarted is usable by a client once the client's own view lists it again.
                    Method watcherOf = BookKeeper.class.getDeclaredMethod("getBookieWatcher");
                    watcherOf.setAccessible(true);
                    for (BookKeeper bk : clients.values()) {
                        BookieWatcher watcher = (BookieWatcher) watcherOf.invoke(bk);
                        while ((watcher.getBookies().size() < wanted || watcher.getBookies().size() > atMost)
                                && System.nanoTime() < deadline) {
                            Thread.sleep(50);
                        }
                    }
                }
                return true;
            }
            case "configure-client": {
                // Settings a client takes at its start: a client running already is closed, with its handles,
                // and the next command that names it starts it afresh.
                BookKeeper running = clients.remove(client);
                if (running != null) {
                    handles.keySet().removeIf(k -> k.startsWith(client + "/"));
                    running.close();
                }
                explicitLacIntervals.put(client, c.path("explicit_lac_interval").asInt(0));
                return true;
            }
            case "create": {
                LedgerHandle lh = client(client).createLedger(
                        c.path("ensemble").asInt(), c.path("write").asInt(), c.path("ack").asInt(),
                        BookKeeper.DigestType.CRC32C, PASSWORD);
                handles.put(key(client, lh.getId()), lh);
                reply.put("ledger", lh.getId());
                reply.put("metadata", metadata(lh.getLedgerMetadata(), null));
                return true;
            }
            case "add": {
                LedgerHandle lh = handle(client, ledger);
                List<CompletableFuture<Integer>> pending =
                        pendingAdds.computeIfAbsent(key(client, ledger), k -> new ArrayList<>());
                for (int i = 0; i < c.path("count").asInt(1); i++) {
                    CompletableFuture<Integer> done = new CompletableFuture<>();
                    long n = added.merge(key(client, ledger), 1L, Long::sum) - 1;
                    byte[] data = padded("entry " + n + " of ledger " + ledger, c.path("size").asInt(0));
                    lh.asyncAddEntry(data, (rc, h, entryId, ctx) -> {
                        Map<String, Object> event = new LinkedHashMap<>();
                        event.put("ev", "complete");
                        event.put("client", client);
                        event.put("ledger", ledger);
                        event.put("entry", entryId);
                        event.put("rc", rc);
                        event.put("rc_name", BKException.getMessage(rc));
                        observe(event);
                        done.complete(rc);
                    }, null);
                    synchronized (pending) {
                        pending.add(done);
                    }
                }
                if (c.path("wait").asBoolean(true)) {
                    reply.put("results", waitAdds(client, ledger));
                }
                return true;
            }
            case "wait-adds": {
                reply.put("results", waitAdds(client, ledger));
                return true;
            }
            case "close": {
                LedgerHandle lh = handle(client, ledger);
                reply.put("rc", outcome(() -> lh.close()));
                return true;
            }
            case "open": {
                BookKeeper bk = client(client);
                LedgerHandle lh = c.path("recovery").asBoolean(true)
                        ? bk.openLedger(ledger, BookKeeper.DigestType.CRC32C, PASSWORD)
                        : bk.openLedgerNoRecovery(ledger, BookKeeper.DigestType.CRC32C, PASSWORD);
                handles.put(key(client, ledger), lh);
                Map<String, Object> opened = new LinkedHashMap<>();
                opened.put("ev", "opened");
                opened.put("client", client);
                opened.put("ledger", ledger);
                opened.put("recovery", c.path("recovery").asBoolean(true));
                opened.put("lac", lh.getLastAddConfirmed());
                observe(opened);
                reply.put("last_add_confirmed", lh.getLastAddConfirmed());
                reply.put("metadata", metadata(lh.getLedgerMetadata(), null));
                return true;
            }
            case "read": {
                LedgerHandle lh = handle(client, ledger);
                List<String> entries = new ArrayList<>();
                List<Integer> sizes = new ArrayList<>();
                for (LedgerEntry e : java.util.Collections.list(
                        lh.readEntries(c.path("first").asLong(), c.path("last").asLong()))) {
                    byte[] data = e.getEntry();
                    entries.add(unpadded(data));
                    sizes.add(data.length);
                }
                reply.put("entries", entries);
                reply.put("sizes", sizes);
                return true;
            }
            case "batch-read": {
                // LedgerHandle.batchReadAsync: one BATCH_READ_ENTRY per request on the v2 protocol, with
                // batchReadEnabled (the default) and E = Qw; otherwise plain reads of the same entries.
                LedgerHandle lh = handle(client, ledger);
                List<String> entries = new ArrayList<>();
                try (LedgerEntries read = lh.batchReadAsync(c.path("first").asLong(), c.path("count").asInt(),
                        c.path("size").asLong()).get(WAIT_SECONDS, TimeUnit.SECONDS)) {
                    for (org.apache.bookkeeper.client.api.LedgerEntry e : read) { // the api one: LedgerEntry is v1
                        entries.add(unpadded(e.getEntryBytes()));
                    }
                }
                reply.put("entries", entries);
                return true;
            }
            case "entries-of-ledger": {
                // BookieClient.getListOfEntriesOfLedger: GET_LIST_OF_ENTRIES_OF_LEDGER to one bookie (v3 only), as
                // the replication worker's LedgerChecker asks it; the entries up to "last" it says it has.
                Field bookieClientField = BookKeeper.class.getDeclaredField("bookieClient");
                bookieClientField.setAccessible(true);
                BookieClient bookies = (BookieClient) bookieClientField.get(client(client));
                AvailabilityOfEntriesOfLedger available = bookies
                        .getListOfEntriesOfLedger(BookieId.parse(c.path("bookie").asText()), ledger)
                        .get(WAIT_SECONDS, TimeUnit.SECONDS);
                List<Long> entries = new ArrayList<>();
                for (long e = 0; e <= c.path("last").asLong(); e++) {
                    if (available.isEntryAvailable(e)) {
                        entries.add(e);
                    }
                }
                reply.put("entries", entries);
                reply.put("total", available.getTotalNumOfAvailableEntries());
                return true;
            }
            case "read-lac": {
                long lac = handle(client, ledger).readLastConfirmed();
                Map<String, Object> learned = new LinkedHashMap<>();
                learned.put("ev", "lac-read");
                learned.put("client", client);
                learned.put("ledger", ledger);
                learned.put("lac", lac);
                observe(learned);
                reply.put("lac", lac);
                return true;
            }
            case "read-lac-and-entry": {
                // A tailing reader's long poll (ReadHandle.readLastAddConfirmedAndEntry): the bookies answer once
                // their LAC passes entry - 1, or the timeout ends.
                try (org.apache.bookkeeper.client.api.LastConfirmedAndEntry found = handle(client, ledger)
                        .readLastAddConfirmedAndEntry(c.path("entry").asLong(), c.path("timeout").asLong(), false)) {
                    Map<String, Object> learned = new LinkedHashMap<>();
                    learned.put("ev", "lac-read");
                    learned.put("client", client);
                    learned.put("ledger", ledger);
                    learned.put("lac", found.getLastAddConfirmed());
                    observe(learned);
                    reply.put("lac", found.getLastAddConfirmed());
                    reply.put("entry", found.hasEntry()
                            ? new String(found.getEntry().getEntryBytes(), StandardCharsets.UTF_8) : null);
                }
                return true;
            }
            case "timed-adds": {
                // A benchmark's adds: a client of its own, not watched, so that nothing but BookKeeper's own
                // work is timed; at most "window" adds in flight, each of "size" bytes. The client stays open:
                // closed right after its ledger, while writes beyond Qa were still in flight, it failed now and
                // then with a NullPointerException in CompletionValue.errorOutAndRunCallback (4.17.2), on an
                // AddCompletion already released.
                if (timedClient == null) {
                    timedClient = new BookKeeper(clientConf());
                }
                LedgerHandle lh = timedClient.createLedger(c.path("ensemble").asInt(), c.path("write").asInt(),
                        c.path("ack").asInt(), BookKeeper.DigestType.CRC32C, PASSWORD);
                byte[] data = new byte[c.path("size").asInt()];
                Semaphore window = new Semaphore(c.path("window").asInt());
                AtomicInteger failed = new AtomicInteger();
                int count = c.path("count").asInt();
                CountDownLatch done = new CountDownLatch(count);
                long started = System.nanoTime();
                for (int i = 0; i < count; i++) {
                    window.acquire();
                    lh.asyncAddEntry(data, (rc, h, entryId, ctx) -> {
                        if (rc != BKException.Code.OK) {
                            failed.incrementAndGet();
                        }
                        window.release();
                        done.countDown();
                    }, null);
                }
                if (!done.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
                    throw new IllegalStateException(done.getCount() + " of " + count + " adds never completed");
                }
                reply.put("seconds", (System.nanoTime() - started) / 1e9);
                reply.put("failed", failed.get());
                reply.put("last_add_confirmed", lh.getLastAddConfirmed());
                lh.close();
                return true;
            }
            case "metadata": {
                Versioned<LedgerMetadata> v = client(client).getLedgerManager().readLedgerMetadata(ledger)
                        .get(WAIT_SECONDS, TimeUnit.SECONDS);
                reply.put("metadata", metadata(v.getValue(), v.getVersion()));
                return true;
            }
            case "ml-open": {
                ManagedLedgerConfig config = new ManagedLedgerConfig();
                config.setMaxEntriesPerLedger(c.path("max_entries_per_ledger").asInt());
                config.setMinimumRolloverTime(0, TimeUnit.MILLISECONDS);
                if (c.path("maximum_rollover_ms").asInt() > 0) {  // else Pulsar's default, four hours
                    config.setMaximumRolloverTime(c.path("maximum_rollover_ms").asInt(), TimeUnit.MILLISECONDS);
                }
                config.setMetadataMaxEntriesPerLedger(c.path("metadata_max_entries_per_ledger").asInt());
                config.setEnsembleSize(3).setWriteQuorumSize(2).setAckQuorumSize(2);
                config.setMetadataEnsembleSize(3).setMetadataWriteQuorumSize(2).setMetadataAckQuorumSize(2);
                config.setRetentionTime(0, TimeUnit.MILLISECONDS);
                config.setRetentionSizeInMB(0);
                config.setThrottleMarkDelete(0);
                String name = c.path("name").asText();
                ManagedLedger ml = factory(client).open(name, config);
                managedLedgers.put(name, ml);
                Map<String, Object> event = new LinkedHashMap<>();
                event.put("ev", "ml-opened");
                event.put("name", name);
                event.put("ledgers", new ArrayList<>(ml.getLedgersInfo().keySet()));
                observe(event);
                reply.put("ledgers", event.get("ledgers"));
                return true;
            }
            case "ml-add": {
                ManagedLedger ml = managedLedger(c);
                List<List<Long>> positions = new ArrayList<>();
                String failed = null;
                for (int i = 0; i < c.path("count").asInt(1) && failed == null; i++) {
                    byte[] message = ("message " + i).getBytes(StandardCharsets.UTF_8);
                    Position[] added = new Position[1];
                    failed = failure(() -> added[0] = ml.addEntry(message));
                    Map<String, Object> event = new LinkedHashMap<>();
                    event.put("name", c.path("name").asText());
                    if (failed == null) {
                        Position p = added[0];
                        event.put("ev", "published");
                        event.put("position", List.of(p.getLedgerId(), p.getEntryId()));
                        positions.add(List.of(p.getLedgerId(), p.getEntryId()));
                    } else {  // the producer is answered with an error: no position, nothing acknowledged
                        event.put("ev", "publish-failed");
                        event.put("error", failed);
                    }
                    observe(event);
                }
                reply.put("positions", positions);
                if (failed != null) {
                    reply.put("failed", failed);
                }
                return true;
            }
            case "cursor-open": {
                ManagedCursor cursor = managedLedger(c).openCursor(c.path("cursor").asText());
                cursors.put(c.path("name").asText() + "/" + c.path("cursor").asText(), cursor);
                cursorEvent("cursor-opened", c, cursor);
                return true;
            }
            case "cursor-ack": {
                ManagedCursor cursor = cursor(c);
                String failed = failure(
                        () -> cursor.delete(PositionFactory.create(c.path("ledger").asLong(), c.path("entry").asLong())));
                cursorEvent("acked", c, cursor, failed);
                return true;
            }
            case "cursor-mark-delete": {
                ManagedCursor cursor = cursor(c);
                String failed = failure(() -> cursor.markDelete(
                        PositionFactory.create(c.path("ledger").asLong(), c.path("entry").asLong())));
                cursorEvent("mark-deleted", c, cursor, failed);
                return true;
            }
            case "cursor-reset": {
                // resetCursor: read again from this position; it returns once the reset's persist completed
                ManagedCursor cursor = cursor(c);
                cursor.resetCursor(PositionFactory.create(c.path("ledger").asLong(), c.path("entry").asLong()));
                cursorEvent("reset", c, cursor);
                return true;
            }
            case "cursor-read-all": {
                // What a consumer is dispatched from the read position on: readEntries skips the individually
                // deleted entries (OpReadEntry, filterReadEntries; ManagedCursorImpl, Pulsar 4.0.7)
                ManagedCursor cursor = cursor(c);
                List<List<Long>> delivered = new ArrayList<>();
                for (int reads = 0; cursor.hasMoreEntries() && reads < 1000; reads++) {
                    for (Entry entry : cursor.readEntries(10)) {
                        delivered.add(List.of(entry.getLedgerId(), entry.getEntryId()));
                        entry.release();
                    }
                }
                Map<String, Object> event = new LinkedHashMap<>();
                event.put("ev", "delivered");
                event.put("name", c.path("name").asText());
                event.put("cursor", c.path("cursor").asText());
                event.put("positions", delivered);
                observe(event);
                reply.put("positions", delivered);
                return true;
            }
            case "cursor-rewind": {
                // rewind: read again from the entry after the mark-delete position (getNextValidPosition)
                ManagedCursor cursor = cursor(c);
                cursor.rewind();
                Position read = cursor.getReadPosition();
                Map<String, Object> event = new LinkedHashMap<>();
                event.put("ev", "rewound");
                event.put("name", c.path("name").asText());
                event.put("cursor", c.path("cursor").asText());
                event.put("read_position", List.of(read.getLedgerId(), read.getEntryId()));
                observe(event);
                return true;
            }
            case "cursor-close": {
                ManagedCursor cursor = cursor(c);
                cursor.close();
                cursorEvent("cursor-closed", c, null);
                return true;
            }
            case "ml-trim": {
                CompletableFuture<Void> trimmed = new CompletableFuture<>();
                managedLedger(c).trimConsumedLedgersInBackground(trimmed);
                trimmed.get(WAIT_SECONDS, TimeUnit.SECONDS);
                reply.put("ledgers", new ArrayList<>(managedLedger(c).getLedgersInfo().keySet()));
                return true;
            }
            case "ml-close": {
                managedLedger(c).close();
                Map<String, Object> event = new LinkedHashMap<>();
                event.put("ev", "ml-closed");
                event.put("name", c.path("name").asText());
                observe(event);
                return true;
            }
            case "quit":
                return false;
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    // -- a broker's managed ledgers and cursors ------------------------------------------------
    private final Map<String, ManagedLedger> managedLedgers = new ConcurrentHashMap<>();
    private final Map<String, ManagedCursor> cursors = new ConcurrentHashMap<>();
    private ManagedLedgerFactory factory;
    private BookKeeper timedClient;

    /** The broker's managed-ledger factory, on client ``client``'s (watched) BookKeeper and its own store. */
    private ManagedLedgerFactory factory(int client) throws Exception {
        if (factory == null) {
            String zk = metadataUri.replaceFirst("^zk\\+hierarchical://", "").replaceFirst("/ledgers$", "");
            MetadataStoreExtended store = MetadataStoreExtended.create("zk:" + zk, MetadataStoreConfig.builder().build());
            factory = new ManagedLedgerFactoryImpl(store, client(client));
        }
        return factory;
    }

    private ManagedLedger managedLedger(JsonNode c) {
        ManagedLedger ml = managedLedgers.get(c.path("name").asText());
        if (ml == null) {
            throw new IllegalArgumentException("no managed ledger " + c.path("name").asText() + " is open");
        }
        return ml;
    }

    private ManagedCursor cursor(JsonNode c) {
        ManagedCursor cursor = cursors.get(c.path("name").asText() + "/" + c.path("cursor").asText());
        if (cursor == null) {
            throw new IllegalArgumentException("no cursor " + c.path("cursor").asText() + " is open");
        }
        return cursor;
    }

    /** What a consumer of the cursor sees: its mark-delete, and which of the given positions it will not deliver. */
    private void cursorEvent(String kind, JsonNode c, ManagedCursor cursor) {
        cursorEvent(kind, c, cursor, null);
    }

    /**
     * The same, after an acknowledgement whose persist failed (``failed``: why, or null): the cursor took it in
     * memory (asyncDelete and asyncMarkDelete update it before they persist; ManagedCursorImpl, Pulsar 4.0.7).
     */
    private void cursorEvent(String kind, JsonNode c, ManagedCursor cursor, String failed) {
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("ev", kind);
        event.put("name", c.path("name").asText());
        event.put("cursor", c.path("cursor").asText());
        if (c.has("ledger")) {
            event.put("position", List.of(c.path("ledger").asLong(), c.path("entry").asLong()));
        }
        if (cursor != null) {
            Position md = cursor.getMarkDeletedPosition();
            event.put("mark_delete", List.of(md.getLedgerId(), md.getEntryId()));
            List<List<Long>> covered = new ArrayList<>();
            for (JsonNode p : c.path("published")) {
                Position position = PositionFactory.create(p.get(0).asLong(), p.get(1).asLong());
                if (position.compareTo(md) <= 0 || cursor.isMessageDeleted(position)) {
                    covered.add(List.of(position.getLedgerId(), position.getEntryId()));
                }
            }
            event.put("covered", covered);
        }
        if (failed != null) {
            event.put("failed", failed);
        }
        observe(event);
    }

    private interface Call {
        void run() throws Exception;
    }

    /** null, or why the managed ledger refused the call (its ManagedLedgerException). */
    private static String failure(Call call) throws Exception {
        try {
            call.run();
            return null;
        } catch (ManagedLedgerException e) {
            return e.getClass().getSimpleName() + ": " + e.getMessage();
        }
    }

    /** 0, or the BookKeeper return code of the exception the call threw. */
    private static int outcome(Call call) throws Exception {
        try {
            call.run();
            return BKException.Code.OK;
        } catch (BKException e) {
            return e.getCode();
        }
    }

    private List<Integer> waitAdds(int client, long ledger) throws Exception {
        List<CompletableFuture<Integer>> pending = pendingAdds.getOrDefault(key(client, ledger), new ArrayList<>());
        List<Integer> results = new ArrayList<>();
        synchronized (pending) {
            for (CompletableFuture<Integer> f : pending) {
                results.add(f.get(WAIT_SECONDS, TimeUnit.SECONDS));
            }
            pending.clear();
        }
        return results;
    }

    private LedgerHandle handle(int client, long ledger) {
        LedgerHandle lh = handles.get(key(client, ledger));
        if (lh == null) {
            throw new IllegalArgumentException("client " + client + " holds no handle of ledger " + ledger);
        }
        return lh;
    }

    private ClientConfiguration clientConf() {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(metadataUri);
        conf.setAddEntryTimeout(5);
        conf.setReadEntryTimeout(5);
        conf.setZkTimeout(10000);
        // The v2 binary protocol, as Pulsar's brokers use it (bookkeeperUseV2WireProtocol), when asked for.
        conf.setUseV2WireProtocol(Boolean.getBoolean("ledgerspec.useV2WireProtocol"));
        return conf;
    }

    private BookKeeper client(int id) throws Exception {
        BookKeeper bk = clients.get(id);
        if (bk == null) {
            ClientConfiguration conf = clientConf();
            // 0, the default, sends no explicit LAC (LedgerHandle.initializeWriteHandleState).
            conf.setExplictLacInterval(explicitLacIntervals.getOrDefault(id, 0));
            bk = new BookKeeper(conf);
            watch(bk, id);
            clients.put(id, bk);
        }
        return bk;
    }

    // -- what a client sees --------------------------------------------------------------
    private void watch(BookKeeper bk, int client) throws Exception {
        Field bookieClientField = BookKeeper.class.getDeclaredField("bookieClient");
        bookieClientField.setAccessible(true);
        BookieClient real = (BookieClient) bookieClientField.get(bk);
        bookieClientField.set(bk, Proxy.newProxyInstance(BookieClient.class.getClassLoader(),
                new Class<?>[] {BookieClient.class}, new BookieClientWatch(real, client)));

        Field managerField = BookKeeper.class.getDeclaredField("ledgerManager");
        managerField.setAccessible(true);
        Object cleanup = managerField.get(bk);
        Field underlyingField = cleanup.getClass().getDeclaredField("underlying");
        underlyingField.setAccessible(true);
        LedgerManager underlying = (LedgerManager) underlyingField.get(cleanup);
        underlyingField.set(cleanup, Proxy.newProxyInstance(LedgerManager.class.getClassLoader(),
                new Class<?>[] {LedgerManager.class}, new LedgerManagerWatch(underlying, client)));
    }

    private static Object forward(Object target, Method method, Object[] args) throws Throwable {
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    private Map<String, Object> request(String ev, int client, String op, BookieId bookie, long ledger, long entry) {
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("ev", ev);
        event.put("client", client);
        event.put("op", op);
        event.put("bookie", bookie.toString());
        event.put("ledger", ledger);
        event.put("entry", entry);
        return event;
    }

    private static final Field CHANGING_ENSEMBLE;

    static {
        try {
            CHANGING_ENSEMBLE = LedgerHandle.class.getDeclaredField("changingEnsemble");
            CHANGING_ENSEMBLE.setAccessible(true);
        } catch (NoSuchFieldException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** LedgerHandle.changingEnsemble: while it is set, the handle completes no add (sendAddSuccessCallbacks). */
    private static boolean changingEnsemble(LedgerHandle lh) {
        try {
            return CHANGING_ENSEMBLE.getBoolean(lh);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    private void reportHandle(int client, long ledger) {
        LedgerHandle lh = handles.get(key(client, ledger));
        if (lh != null) {
            Map<String, Object> event = new LinkedHashMap<>();
            event.put("ev", "after");
            event.put("client", client);
            event.put("ledger", ledger);
            event.put("lac", lh.getLastAddConfirmed());
            event.put("lap", lh.getLastAddPushed());
            observe(event);
        }
    }

    /**
     * The LAC an add carries to its bookie, from the entry's header as the digest manager wrote it
     * (ledger, entry, LAC): the handle's LAC when it packaged the add, which may be later than its
     * last reported one, since the application's thread adds while the ledger's thread takes replies.
     */
    private static Long packagedLac(Object toSend) {
        ByteBuf header = null;
        if (toSend instanceof ByteBufList && ((ByteBufList) toSend).size() > 0) {
            header = ((ByteBufList) toSend).getBuffer(0);
        } else if (toSend instanceof ByteBuf) {
            header = (ByteBuf) toSend;
        }
        if (header == null || header.readableBytes() < 24) {
            return null;
        }
        return header.getLong(header.readerIndex() + 16);
    }

    private final class BookieClientWatch implements InvocationHandler {
        private final BookieClient real;
        private final int client;

        BookieClientWatch(BookieClient real, int client) {
            this.real = real;
            this.client = client;
        }

        @Override
        public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
            String name = method.getName();
            if (name.equals("addEntry") && args.length == 10) {
                BookieId bookie = (BookieId) args[0];
                long ledger = (Long) args[1];
                long entry = (Long) args[3];
                WriteCallback cb = (WriteCallback) args[5];
                Map<String, Object> send = request("send", client, "add", bookie, ledger, entry);
                send.put("flags", args[7]);
                Long packaged = packagedLac(args[4]);
                if (packaged != null) {
                    send.put("lac", packaged);
                }
                observe(send);
                args[5] = (WriteCallback) (rc, ledgerId, entryId, addr, ctx) -> {
                    Map<String, Object> event = request("reply", client, "add", addr, ledgerId, entryId);
                    event.put("rc", rc);
                    event.put("rc_name", BKException.getMessage(rc));
                    LedgerHandle lh = handles.get(key(client, ledgerId));
                    if (lh != null) {
                        // Replies and the end of an ensemble change run on the ledger's one thread, so the
                        // flag read here is the one this reply meets.
                        event.put("changing", changingEnsemble(lh));
                    }
                    observe(event);
                    cb.writeComplete(rc, ledgerId, entryId, addr, ctx);
                    reportHandle(client, ledgerId);
                };
            } else if (name.equals("readEntry")) {
                // Every overload has (bookie, ledger, entry, callback, ctx[, flags, ...]); the shorter ones are
                // default methods that call the longest on the real client, past this proxy.
                BookieId bookie = (BookieId) args[0];
                long ledger = (Long) args[1];
                long entry = (Long) args[2];
                ReadEntryCallback cb = (ReadEntryCallback) args[3];
                Map<String, Object> send = request("send", client, "read", bookie, ledger, entry);
                send.put("flags", args.length > 5 ? ((Number) args[5]).intValue() : 0);
                observe(send);
                args[3] = (ReadEntryCallback) (rc, ledgerId, entryId, buffer, ctx) -> {
                    Map<String, Object> event = request("reply", client, "read", bookie, ledgerId, entryId);
                    event.put("rc", rc);
                    event.put("rc_name", BKException.getMessage(rc));
                    if (buffer != null && buffer.readableBytes() >= 24) {
                        // The entry's header, as the digest manager reads it: ledger, entry, piggybacked LAC.
                        int at = buffer.readerIndex();
                        event.put("returned_entry", buffer.getLong(at + 8));
                        event.put("returned_lac", buffer.getLong(at + 16));
                    }
                    observe(event);
                    cb.readEntryComplete(rc, ledgerId, entryId, buffer, ctx);
                };
            } else if (name.equals("writeLac")) {
                // (bookie, ledger, masterKey, lac, toSend, callback, ctx): lac is the LAC the flush policy read,
                // whose write set the request goes to; toSend the LAC packaged later (ledger, LAC, digest).
                BookieId bookie = (BookieId) args[0];
                long ledger = (Long) args[1];
                WriteLacCallback cb = (WriteLacCallback) args[5];
                Map<String, Object> send = request("send", client, "write-lac", bookie, ledger, -1);
                send.put("lac", args[3]);
                ByteBufList toSend = (ByteBufList) args[4];
                if (toSend.size() > 0 && toSend.getBuffer(0).readableBytes() >= 16) {
                    ByteBuf body = toSend.getBuffer(0);
                    send.put("packaged", body.getLong(body.readerIndex() + 8));
                }
                observe(send);
                args[5] = (WriteLacCallback) (rc, ledgerId, addr, ctx) -> {
                    Map<String, Object> event = request("reply", client, "write-lac", addr, ledgerId, -1);
                    event.put("rc", rc);
                    event.put("rc_name", BKException.getMessage(rc));
                    observe(event);
                    cb.writeLacComplete(rc, ledgerId, addr, ctx);
                };
            } else if (name.equals("readEntryWaitForLACUpdate")) {
                // A long poll: (bookie, ledger, entry, previousLAC, timeout, piggyBackEntry, callback, ctx). The
                // reply carries the bookie's LAC in its context, and the entry when the bookie returned one.
                BookieId bookie = (BookieId) args[0];
                long ledger = (Long) args[1];
                ReadEntryCallback cb = (ReadEntryCallback) args[6];
                Map<String, Object> send = request("send", client, "long-poll", bookie, ledger, (Long) args[2]);
                send.put("previous_lac", args[3]);
                observe(send);
                args[6] = (ReadEntryCallback) (rc, ledgerId, entryId, buffer, ctx) -> {
                    Map<String, Object> event = request("reply", client, "long-poll", bookie, ledgerId, entryId);
                    event.put("rc", rc);
                    event.put("rc_name", BKException.getMessage(rc));
                    if (ctx instanceof ReadLastConfirmedAndEntryContext) {
                        event.put("lac", ((ReadLastConfirmedAndEntryContext) ctx).getLastAddConfirmed());
                    }
                    event.put("has_entry", buffer != null && buffer.readableBytes() > 0);
                    observe(event);
                    cb.readEntryComplete(rc, ledgerId, entryId, buffer, ctx);
                };
            } else if (REQUESTS.contains(name)) {
                Map<String, Object> event = request("unwatched", client, name, (BookieId) args[0], (Long) args[1], -1);
                observe(event);
            }
            return forward(real, method, args);
        }
    }

    /** The other requests a client sends to bookies: reported, so that a trace never leaves one out unnoticed. */
    private static final java.util.Set<String> REQUESTS = java.util.Set.of(
            "batchReadEntries", "readLac", "forceLedger");

    private Map<String, Object> metadata(LedgerMetadata m, Version version) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", m.getState().name());
        Map<String, List<String>> ensembles = new TreeMap<>((a, b) -> Long.compare(Long.parseLong(a), Long.parseLong(b)));
        for (Map.Entry<Long, ? extends List<BookieId>> e : m.getAllEnsembles().entrySet()) {
            List<String> ids = new ArrayList<>();
            e.getValue().forEach(b -> ids.add(b.toString()));
            ensembles.put(Long.toString(e.getKey()), ids);
        }
        out.put("ensembles", ensembles);
        out.put("last_entry", m.getLastEntryId());
        out.put("ensemble_size", m.getEnsembleSize());
        out.put("write_quorum", m.getWriteQuorumSize());
        out.put("ack_quorum", m.getAckQuorumSize());
        if (version instanceof LongVersion) {
            out.put("version", ((LongVersion) version).getLongVersion());
        }
        Map<String, String> custom = new TreeMap<>();
        m.getCustomMetadata().forEach((k, v) -> custom.put(k, new String(v, StandardCharsets.UTF_8)));
        out.put("custom", custom);
        return out;
    }

    private final class LedgerManagerWatch implements InvocationHandler {
        private final LedgerManager real;
        private final int client;

        LedgerManagerWatch(LedgerManager real, int client) {
            this.real = real;
            this.client = client;
        }

        @Override
        @SuppressWarnings("unchecked")
        public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
            String name = method.getName();
            if (name.equals("removeLedgerMetadata")) {
                return removed((Long) args[0], (CompletableFuture<Void>) forward(real, method, args));
            }
            if (!name.equals("createLedgerMetadata") && !name.equals("writeLedgerMetadata")) {
                return forward(real, method, args);
            }
            long ledger = (Long) args[0];
            LedgerMetadata written = (LedgerMetadata) args[1];
            CompletableFuture<Versioned<LedgerMetadata>> result =
                    (CompletableFuture<Versioned<LedgerMetadata>>) forward(real, method, args);
            return observedFirst(result, (versioned, error) -> {
                Map<String, Object> event = new LinkedHashMap<>();
                event.put("ev", "metadata");
                event.put("client", client);
                event.put("op", name.equals("createLedgerMetadata") ? "create" : "write");
                event.put("ledger", ledger);
                event.put("ok", error == null);
                if (error != null) {
                    Throwable cause = error.getCause() != null ? error.getCause() : error;
                    event.put("error", cause.getClass().getSimpleName());
                    event.put("written", metadata(written, null));
                } else {
                    event.put("written", metadata(versioned.getValue(), versioned.getVersion()));
                }
                observe(event);
            });
        }

        /** A ledger's deletion (``BookKeeper.asyncDeleteLedger``), observed before the caller's continuation. */
        private CompletableFuture<Void> removed(long ledger, CompletableFuture<Void> result) {
            return observedFirst(result, (ignored, error) -> {
                Map<String, Object> event = new LinkedHashMap<>();
                event.put("ev", "ledger-deleted");
                event.put("client", client);
                event.put("ledger", ledger);
                event.put("ok", error == null);
                observe(event);
            });
        }

        /**
         * ``result``, completed only once ``observer`` has seen its outcome: the client's continuation hangs on the
         * future returned, so the observation comes before what the client does next.
         */
        private <T> CompletableFuture<T> observedFirst(CompletableFuture<T> result, BiConsumer<T, Throwable> observer) {
            CompletableFuture<T> seen = new CompletableFuture<>();
            result.whenComplete((value, error) -> {
                observer.accept(value, error);
                if (error != null) {
                    seen.completeExceptionally(error);
                } else {
                    seen.complete(value);
                }
            });
            return seen;
        }
    }
}
