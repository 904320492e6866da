import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import jdk.jfr.consumer.RecordedClass;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedMethod;
import jdk.jfr.consumer.RecordedObject;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordedThread;
import jdk.jfr.consumer.RecordingFile;

/**
 * Prints the jdk.ExecutionSample events of a JFR recording, read with the JDK's own parser
 * (jdk.jfr.consumer, which the jfr tool uses too), one JSON object a line, with the fields that
 * `jfr print --json --stack-depth DEPTH` gives them and in its shape:
 * {"values": {"startTime", "sampledThread": {"javaName", "osThreadId", "virtual"}, "stackTrace":
 * {"truncated", "frames": [{"method": {"type": {"name", "hidden"}, "name"}}]}}}, the newest frame
 * first; startTime in nanoseconds since the Unix epoch (jfr print writes it as a date).
 * Field values are the recording's own, as jfr print writes them (getString, getLong: not the
 * accessors that turn them, such as RecordedClass.getName). `jfr print --json` writes every
 * field of every object (hundreds of MB for a run of javac sampled every millisecond): this writes
 * only those.
 *
 * <p>Usage: java ExecutionSamples RECORDING DEPTH
 */
public class ExecutionSamples {
    public static void main(String[] args) throws Exception {
        Path recording = Path.of(args[0]);
        int depth = Integer.parseInt(args[1]);
        BufferedWriter out = new BufferedWriter(
                new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        StringBuilder line = new StringBuilder();
        try (RecordingFile file = new RecordingFile(recording)) {
            while (file.hasMoreEvents()) {
                RecordedEvent event = file.readEvent();
                if (!event.getEventType().getName().equals("jdk.ExecutionSample")) {
                    continue;
                }
                line.setLength(0);
                Instant start = event.getStartTime();
                line.append("{\"values\":{\"startTime\":")
                        .append(start.getEpochSecond() * 1_000_000_000L + start.getNano())
                        .append(",\"sampledThread\":");
                thread(line, event.getThread("sampledThread"));
                line.append(",\"stackTrace\":");
                stack(line, event.getStackTrace(), depth);
                line.append("}}\n");
                out.append(line);
            }
        }
        out.flush();
    }

    private static void thread(StringBuilder line, RecordedThread thread) {
        if (thread == null) {
            line.append("null");
            return;
        }
        line.append("{\"javaName\":");
        string(line, thread.getString("javaName"));
        // The recorded value: getOSThreadId() gives -1 for a virtual thread where the recording has 0
        line.append(",\"osThreadId\":").append(thread.getLong("osThreadId"));
        // A field of Java 21 on: absent before, as in jfr print's output
        if (thread.hasField("virtual")) {
            line.append(",\"virtual\":").append(thread.getBoolean("virtual"));
        }
        line.append('}');
    }

    private static void stack(StringBuilder line, RecordedStackTrace stack, int depth) {
        if (stack == null) {
            line.append("null");
            return;
        }
        line.append("{\"truncated\":").append(stack.isTruncated()).append(",\"frames\":[");
        List<RecordedFrame> frames = stack.getFrames();
        for (int i = 0; i < frames.size() && i < depth; i++) {
            if (i > 0) {
                line.append(',');
            }
            RecordedMethod method = frames.get(i).getMethod();
            line.append("{\"method\":");
            if (method == null) {
                line.append("null}");
                continue;
            }
            line.append("{\"type\":");
            RecordedClass type = method.getType();
            if (type == null) {
                line.append("null");
            } else {
                line.append("{\"name\":");
                // The name as recorded (internal form), as jfr print writes it: getName() gives it dotted
                string(line, type.getString("name"));
                if (type.hasField("hidden")) {
                    line.append(",\"hidden\":").append(type.getBoolean("hidden"));
                }
                line.append('}');
            }
            line.append(",\"name\":");
            string(line, method.getString("name"));
            line.append("}}");
        }
        line.append("]}");
    }

    /** `text` as a JSON string (or null). */
    private static void string(StringBuilder line, String text) {
        if (text == null) {
            line.append("null");
            return;
        }
        line.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> line.append("\\\"");
                case '\\' -> line.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        line.append(String.format("\\u%04x", (int) c));
                    } else {
                        line.append(c);
                    }
                }
            }
        }
        line.append('"');
    }
}
