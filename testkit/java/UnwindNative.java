import java.io.File;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.RandomAccessFile;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.security.MessageDigest;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Threads whose samples land mostly outside Java code, each in a loop of its own:
 * "file" (RandomAccessFile reads and writes: JNI into libjava and libc), "socket" and "echo"
 * (a loopback TCP connection: JNI into libnet/libnio, the kernel), "arraycopy" (System.arraycopy
 * of large arrays: a JIT stub), "hashcode" (identity hash codes of new objects: the VM),
 * "intern" (String.intern: the VM's string table), "crypto" (SHA-256 and AES-GCM: intrinsic stubs),
 * "clock" (System.nanoTime: the vDSO, called from compiled code without leaving Java).
 * Each thread's loop is the method `<name>Loop`. Prints READY once every thread runs, then runs
 * for the seconds given (forever without an argument).
 */
public class UnwindNative {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : Long.MAX_VALUE / 2_000_000_000L;
        ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        Thread[] threads = {
            start("file", UnwindNative::fileLoop),
            start("echo", () -> echoLoop(server)),
            start("socket", () -> socketLoop(server.getLocalPort())),
            start("arraycopy", UnwindNative::arraycopyLoop),
            start("hashcode", UnwindNative::hashcodeLoop),
            start("intern", UnwindNative::internLoop),
            start("crypto", UnwindNative::cryptoLoop),
            start("clock", UnwindNative::clockLoop),
        };
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        Thread.sleep(seconds * 1000);
        System.out.println("DONE " + sink + " " + threads.length);
        System.exit(0);
    }

    interface Body {
        void run() throws Exception;
    }

    static Thread start(String name, Body body) {
        Thread thread = new Thread(() -> {
            try {
                body.run();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, name);
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    static void fileLoop() throws Exception {
        File file = File.createTempFile("unwind-native", ".bin");
        file.deleteOnExit();
        byte[] buffer = new byte[1 << 16];
        try (RandomAccessFile raf = new RandomAccessFile(file, "rw")) {
            while (true) {
                raf.seek(0);
                raf.write(buffer);
                raf.seek(0);
                sink += raf.read(buffer);
            }
        }
    }

    static void echoLoop(ServerSocket server) throws Exception {
        try (Socket socket = server.accept()) {
            InputStream in = socket.getInputStream();
            OutputStream out = socket.getOutputStream();
            byte[] buffer = new byte[1 << 16];
            int n;
            while ((n = in.read(buffer)) > 0) {
                out.write(buffer, 0, n);
            }
        }
    }

    static void socketLoop(int port) throws Exception {
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
            InputStream in = socket.getInputStream();
            OutputStream out = socket.getOutputStream();
            byte[] buffer = new byte[1 << 16];
            while (true) {
                out.write(buffer);
                int left = buffer.length;
                while (left > 0) {
                    left -= in.read(buffer, 0, left);
                }
            }
        }
    }

    static void arraycopyLoop() {
        long[] from = new long[1 << 17];
        long[] to = new long[1 << 17];
        while (true) {
            System.arraycopy(from, 0, to, 0, from.length);
            from[(int) (sink & 0xffff)] = to[1];
        }
    }

    static void hashcodeLoop() {
        while (true) {
            sink += new Object().hashCode();
        }
    }

    static void internLoop() {
        long i = 0;
        while (true) {
            sink += ("interned-" + (i++ % 100_000)).intern().length();
        }
    }

    static void cryptoLoop() throws Exception {
        byte[] data = new byte[1 << 16];
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        Cipher aes = Cipher.getInstance("AES/GCM/NoPadding");
        SecretKeySpec key = new SecretKeySpec(new byte[16], "AES");
        long iv = 0;
        while (true) {
            sink += sha.digest(data)[0];
            byte[] nonce = new byte[12];
            nonce[0] = (byte) iv;
            nonce[1] = (byte) (iv++ >> 8);
            aes.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, nonce));
            sink += aes.doFinal(data).length;
        }
    }

    static void clockLoop() {
        while (true) {
            sink += System.nanoTime();
        }
    }
}
