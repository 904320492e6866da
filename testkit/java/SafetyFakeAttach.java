import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A JVM that listens on its own attach socket name, /tmp/.java_pid<pid>, in place of HotSpot's
 * attach listener: the profiler's peer check (the JVM's own pid and user) passes, so what this
 * answers is what the profiler reads. With {@code flood}, every request gets status 0 and 16 MB
 * of terminal escape sequences; with {@code perfmap}, {@code load} fails (with escapes in its
 * answer) and {@code jcmd Compiler.perfmap} succeeds without writing anything, so the profiler
 * reads whatever is at /tmp/perf-<pid>.map. After answering its Nth request it creates
 * {@code answered-N} in its working folder. Prints READY once it listens; runs until killed.
 */
public class SafetyFakeAttach {
    static final String ESCAPES = "\u001b[2J\u001b]0;owned\u0007\u001b[31mroot, run this\n";

    public static void main(String[] args) throws Exception {
        boolean flood = args.length > 0 && args[0].equals("flood");
        long pid = ProcessHandle.current().pid();
        Path socket = Path.of("/tmp/.java_pid" + pid);
        Files.deleteIfExists(socket);
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(socket));
            System.out.println("READY " + pid);
            System.out.flush();
            for (int answered = 1; ; answered++) {
                try (SocketChannel client = server.accept()) {
                    String request = readRequest(client);
                    String reply;
                    if (flood) {
                        reply = "0\n" + ESCAPES.repeat((16 << 20) / ESCAPES.length());
                    } else if (request.startsWith("load")) {
                        reply = "0\nreturn code: 1\n" + ESCAPES;
                    } else {
                        reply = "0\n";
                    }
                    client.write(ByteBuffer.wrap(reply.getBytes(StandardCharsets.UTF_8)));
                } catch (IOException e) {
                    // The profiler stopped reading: its cap.
                }
                Files.createFile(Path.of("answered-" + answered));
            }
        }
    }

    /** The request's command and arguments (after the protocol version), up to its 5th NUL. */
    static String readRequest(SocketChannel client) throws IOException {
        ByteBuffer buffer = ByteBuffer.allocate(4096);
        int nuls = 0;
        while (nuls < 5 && buffer.hasRemaining() && client.read(buffer) > 0) {
            nuls = 0;
            for (int i = 0; i < buffer.position(); i++) {
                if (buffer.get(i) == 0) {
                    nuls++;
                }
            }
        }
        String text = new String(buffer.array(), 0, buffer.position(), StandardCharsets.UTF_8);
        int start = text.indexOf('\0') + 1;
        return text.substring(start).replace('\0', ' ');
    }
}
