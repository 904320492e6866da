/**
 * The main thread starts a new thread every 20 ms: the thread runs a lambda that calls a static
 * method spending 15 ms in a hot loop, then ends; meanwhile main spends 20 ms in another method
 * and joins it. So the short threads hold about 15/35 = 43% of the CPU time.
 *
 * Prints `READY <pid>`, runs for the number of seconds given as the first argument, then prints
 * `CPU <tasks> <main> <process>`: the CPU time in ns of the short threads in {@code loop}, of main
 * in {@code mainWork} (each thread's own CPU time over its work, from ThreadMXBean: the
 * scheduler's count), and of the whole JVM so far.
 */
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.concurrent.atomic.AtomicLong;

public class ShortTasks {
    static volatile long sink;
    // What is set up once is set up here, in the class's initialisation, so that main's stack
    // holds the steady work only: the lambda (linked here), the beans, the pid.
    static final Runnable TASK = () -> task();
    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    static final AtomicLong TASKS_CPU = new AtomicLong();
    static final String READY = String.join(" ", "READY", Long.toString(ProcessHandle.current().pid()));

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        System.out.println(READY);
        System.out.flush();
        long mainCpu = 0;
        while (System.nanoTime() < end) {
            Thread t = new Thread(TASK);
            t.start();
            long before = THREADS.getCurrentThreadCpuTime();
            mainWork();
            mainCpu += THREADS.getCurrentThreadCpuTime() - before;
            t.join();
        }
        // No string concatenation: its first use links a call site, work that is not main's.
        System.out.println(String.join(" ", "CPU", Long.toString(TASKS_CPU.get()),
                Long.toString(mainCpu), Long.toString(OS.getProcessCpuTime())));
    }

    static void task() {
        long before = THREADS.getCurrentThreadCpuTime();
        loop(15_000_000L);
        TASKS_CPU.addAndGet(THREADS.getCurrentThreadCpuTime() - before);
    }

    static void loop(long nanos) {
        long end = System.nanoTime() + nanos;
        long h = 7;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 200; i++) {
                h ^= h << 13;
                h ^= h >>> 7;
                h ^= h << 17;
            }
        }
        sink = h;
    }

    static void mainWork() {
        long end = System.nanoTime() + 20_000_000L;
        long h = 3;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 200; i++) {
                h ^= h << 13;
                h ^= h >>> 7;
                h ^= h << 17;
            }
        }
        sink = h;
    }
}
