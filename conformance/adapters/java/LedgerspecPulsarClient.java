/*
 * Drives the released Apache Pulsar Java client against a real broker for
 * ledgerspec and reports what the client sees, and nothing else.
 *
 * The same line protocol as LedgerspecHarness: commands arrive on stdin, one
 * JSON object a line; every line written to stdout is a reply to a command
 * ({"reply": id, ...}) or an observation ({"obs": n, "ev": ...}), numbered in
 * the order this process saw them:
 *
 *   - "sent": a message handed to the producer, with its sequence id;
 *   - "receipt": the broker's answer to it, the message id the send's future
 *     completed with (ledger and entry; -1:-1 is the broker's answer to a
 *     duplicate, PersistentTopic.publishMessage, Pulsar 4.0.7), or
 *     "send-failed" with the client's exception;
 *   - "read": a message a reader got, with its message id, producer and
 *     sequence id.
 *
 * Producers send without batching (one message an entry) and without a send
 * timeout, so that a message whose receipt a crash took is sent again when
 * the producer reconnects (ProducerImpl.resendMessages), however long the
 * broker is away.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.impl.MessageIdImpl;

public final class LedgerspecPulsarClient {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static final int WAIT_SECONDS = 60;

    private PulsarClient client;
    private final Map<String, Producer<String>> producers = new ConcurrentHashMap<>();
    private final AtomicLong observations = new AtomicLong();

    public static void main(String[] args) throws Exception {
        LedgerspecPulsarClient harness = new LedgerspecPulsarClient();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode command = JSON.readTree(line);
            Map<String, Object> reply = new LinkedHashMap<>();
            reply.put("reply", command.path("id").asLong());
            boolean more = true;
            try {
                more = harness.run(command, reply);
            } catch (Exception e) {
                reply.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            harness.emit(reply);
            if (!more) {
                break;
            }
        }
        OUT.flush();
        // The client's threads may still wait on a broker that is gone: leave without waiting for them.
        Runtime.getRuntime().halt(0);
    }

    private synchronized void emit(Map<String, Object> line) {
        try {
            OUT.println(JSON.writeValueAsString(line));
            OUT.flush();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** An observation, numbered before the output lock (as LedgerspecHarness.observe does). */
    private void observe(Map<String, Object> event) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("obs", observations.getAndIncrement());
        line.putAll(event);
        emit(line);
    }

    private static Map<String, Object> event(String kind, Object... fields) {
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("ev", kind);
        for (int i = 0; i < fields.length; i += 2) {
            event.put((String) fields[i], fields[i + 1]);
        }
        return event;
    }

    private static long[] position(MessageId id) {
        MessageIdImpl impl = (MessageIdImpl) id;
        return new long[] {impl.getLedgerId(), impl.getEntryId()};
    }

    private boolean run(JsonNode c, Map<String, Object> reply) throws Exception {
        String cmd = c.path("cmd").asText();
        switch (cmd) {
            case "connect":
                // Reconnect soon after the broker is back: the backoff starts at 100 ms and stays under 1 s.
                client = PulsarClient.builder()
                        .serviceUrl(c.path("service_url").asText())
                        .startingBackoffInterval(100, TimeUnit.MILLISECONDS)
                        .maxBackoffInterval(1, TimeUnit.SECONDS)
                        .operationTimeout(WAIT_SECONDS, TimeUnit.SECONDS)
                        .build();
                return true;
            case "subscribe":
                // A durable subscription that holds every message from the first: the backlog the spec observes.
                client.newConsumer(Schema.STRING)
                        .topic(c.path("topic").asText())
                        .subscriptionName(c.path("subscription").asText())
                        .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                        .subscribe()
                        .close();
                return true;
            case "producer": {
                String name = c.path("name").asText();
                Producer<String> producer = client.newProducer(Schema.STRING)
                        .topic(c.path("topic").asText())
                        .producerName(name)
                        .enableBatching(false)
                        .sendTimeout(0, TimeUnit.SECONDS)
                        .blockIfQueueFull(true)
                        .create();
                producers.put(name, producer);
                reply.put("last_sequence_id", producer.getLastSequenceId());
                return true;
            }
            case "send": {
                String name = c.path("producer").asText();
                long seq = c.path("seq").asLong();
                observe(event("sent", "producer", name, "seq", seq));
                producers.get(name).newMessage().sequenceId(seq).value("message " + seq).sendAsync()
                        .whenComplete((id, error) -> {
                            if (error != null) {
                                observe(event("send-failed", "producer", name, "seq", seq, "error",
                                        error.getClass().getSimpleName() + ": " + error.getMessage()));
                            } else {
                                observe(event("receipt", "producer", name, "seq", seq, "id", position(id)));
                            }
                        });
                return true;
            }
            case "connected":
                reply.put("connected", producers.get(c.path("producer").asText()).isConnected());
                return true;
            case "read-all": {
                // Every message of the topic from the first, in order, with what identifies it.
                try (Reader<String> reader = client.newReader(Schema.STRING)
                        .topic(c.path("topic").asText())
                        .startMessageId(MessageId.earliest)
                        .create()) {
                    int read = 0;
                    while (reader.hasMessageAvailable()) {
                        Message<String> message = reader.readNext(WAIT_SECONDS, TimeUnit.SECONDS);
                        if (message == null) {
                            throw new IllegalStateException("no message within " + WAIT_SECONDS + " s, though "
                                    + "the broker said one was available");
                        }
                        observe(event("read", "id", position(message.getMessageId()),
                                "producer", message.getProducerName(), "seq", message.getSequenceId()));
                        read++;
                    }
                    reply.put("read", read);
                }
                return true;
            }
            case "quit":
                return false;
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }
}
