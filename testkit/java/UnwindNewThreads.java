import java.io.File;
import java.io.RandomAccessFile;

/**
 * Threads that live about 20 ms each, one after the other, all named "fresh": so short that the
 * profiler's listing of the Java threads (at most every 200 ms) rarely knows them. Each spends
 * its life in native leaves, in turn: "clock" (System.nanoTime: the vDSO, from compiled code
 * without leaving Java), "hash" (identity hash codes of new objects: the VM), "file"
 * (RandomAccessFile writes: JNI into libjava, libc and the kernel), "copy" (System.arraycopy of
 * large arrays: a JIT stub). Prints READY, then runs for the seconds given (forever without an
 * argument).
 */
public class UnwindNewThreads {
    static volatile long sink;
    static final byte[] BUFFER = new byte[1 << 16];
    static final long[] FROM = new long[1 << 16];
    static final long[] TO = new long[1 << 16];
    static RandomAccessFile file;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : Long.MAX_VALUE / 2_000_000_000L;
        File temp = File.createTempFile("unwind-new-threads", ".bin");
        temp.deleteOnExit();
        file = new RandomAccessFile(temp, "rw");
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (System.nanoTime() < end) {
            Thread thread = new Thread(UnwindNewThreads::life, "fresh");
            thread.start();
            thread.join();
        }
        System.out.println("DONE " + sink);
    }

    static void life() {
        long end = System.nanoTime() + 20_000_000L;
        int round = 0;
        try {
            while (System.nanoTime() < end) {
                switch (round++ % 4) {
                    case 0 -> clock();
                    case 1 -> hash();
                    case 2 -> file();
                    default -> copy();
                }
            }
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static void clock() {
        for (int i = 0; i < 2000; i++) {
            sink += System.nanoTime();
        }
    }

    static void hash() {
        for (int i = 0; i < 2000; i++) {
            sink += new Object().hashCode();
        }
    }

    static void file() throws Exception {
        file.seek(0);
        file.write(BUFFER);
    }

    static void copy() {
        for (int i = 0; i < 20; i++) {
            System.arraycopy(FROM, 0, TO, 0, FROM.length);
        }
        FROM[(int) (sink & 0xffff)] = TO[1];
    }
}
