import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * N busy threads (the first argument, default 1) in {@code burn}, and a few sleeping ones. Runs
 * until killed, or for the number of seconds given as the second argument. The third argument
 * (default 100) is the percentage of its time each busy thread spends on CPU: below 100, after
 * each 6 ms slice of work it sleeps in proportion to the CPU time the slice took, so that each thread
 * uses the same CPU time whichever CPU the scheduler puts it on, as long as the CPUs are not full.
 */
public class RecordBusy {
    static volatile long sink;
    /** CPU time of one slice of work between two pauses. */
    static final long SLICE_NS = 6_000_000L;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 1;
        long seconds = args.length > 1 ? Long.parseLong(args[1]) : 1_000_000L;
        int percent = args.length > 2 ? Integer.parseInt(args[2]) : 100;
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> burn(percent), "busy-" + t);
            worker.setDaemon(true);
            worker.start();
        }
        for (int t = 0; t < 4; t++) {
            Thread sleeper = new Thread(RecordBusy::sleep, "sleeper-" + t);
            sleeper.setDaemon(true);
            sleeper.start();
        }
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        Thread.sleep(seconds * 1000);
        System.out.println("DONE");
    }

    static void burn(int percent) {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long h = 1;
        while (true) {
            long start = percent < 100 ? mx.getCurrentThreadCpuTime() : 0;
            do {
                for (int i = 0; i < 10_000; i++) {
                    h ^= h << 13;
                    h ^= h >>> 7;
                    h ^= h << 17;
                }
                sink = h;
            } while (percent < 100 && mx.getCurrentThreadCpuTime() - start < SLICE_NS);
            if (percent < 100) {
                long used = mx.getCurrentThreadCpuTime() - start;
                try {
                    Thread.sleep(used * (100 - percent) / percent / 1_000_000);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    static void sleep() {
        try {
            Thread.sleep(Long.MAX_VALUE);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
