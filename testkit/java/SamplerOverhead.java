import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Overhead benchmark workload: two busy threads (Work-1, Work-2) doing fixed work units, beside
 * N idle threads (default 300, Idle-n) that wake every 100 ms and sleep again, or, with "park" as
 * the second argument, that park for good. Prints READY, then every second
 * "UNITS <units done so far> <System.nanoTime()> <CPU ns of both workers>".
 */
public class SamplerOverhead {
    static final AtomicLong units = new AtomicLong();
    static volatile long sink;

    /** One work unit: a fixed number of multiply-adds. */
    static long unit(long x) {
        for (int i = 0; i < 1_000_000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        int idle = args.length > 0 ? Integer.parseInt(args[0]) : 300;
        boolean park = args.length > 1 && args[1].equals("park");
        for (int i = 1; i <= idle; i++) {
            Thread t = new Thread(() -> {
                try {
                    while (true) {
                        if (park) {
                            LockSupport.park();
                        } else {
                            Thread.sleep(100);
                        }
                    }
                } catch (InterruptedException e) {
                    return;
                }
            }, "Idle-" + i);
            t.setDaemon(true);
            t.start();
        }
        Thread[] workers = new Thread[2];
        for (int i = 1; i <= 2; i++) {
            Thread t = new Thread(() -> {
                long x = 1;
                while (true) {
                    x = unit(x);
                    units.incrementAndGet();
                    sink = x;
                }
            }, "Work-" + i);
            t.setDaemon(true);
            t.start();
            workers[i - 1] = t;
        }
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        System.out.println("READY");
        System.out.flush();
        while (true) {
            Thread.sleep(1000);
            long cpu = mx.getThreadCpuTime(workers[0].getId()) + mx.getThreadCpuTime(workers[1].getId());
            System.out.println("UNITS " + units.get() + " " + System.nanoTime() + " " + cpu);
            System.out.flush();
        }
    }
}
