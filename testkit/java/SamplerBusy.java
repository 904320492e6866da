import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * Sampler workload: two busy threads (Busy-1, Busy-2), four sleeping ones (Sleeper-1..4), and,
 * with the argument "short", one short-lived thread every second (Short-N) that spins for
 * 300 ms, prints "SHORT Short-N <its CPU time in ns>" and ends. Prints READY once they run.
 * With the arguments "churn N", it waits for a line on its input, then runs N threads
 * (Churn-1..N) one after another, each ended before the next starts, and prints "CHURNED N".
 */
public class SamplerBusy {
    static volatile long sink;

    static void spin(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 10_000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        sink = x;
    }

    static void churn(int threads) throws Exception {
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        for (int n = 1; n <= threads; n++) {
            Thread thread = new Thread(() -> spin(10_000L), "Churn-" + n);
            thread.start();
            thread.join();
        }
        System.out.println("CHURNED " + threads);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    public static void main(String[] args) throws Exception {
        for (int i = 1; i <= 2; i++) {
            Thread busy = new Thread(() -> spin(Long.MAX_VALUE / 2), "Busy-" + i);
            busy.setDaemon(true);
            busy.start();
        }
        for (int i = 1; i <= 4; i++) {
            Thread sleeper = new Thread(() -> {
                try {
                    Thread.sleep(Long.MAX_VALUE);
                } catch (InterruptedException e) {
                    return;
                }
            }, "Sleeper-" + i);
            sleeper.setDaemon(true);
            sleeper.start();
        }
        System.out.println("READY");
        System.out.flush();
        if (args.length > 1 && args[0].equals("churn")) {
            churn(Integer.parseInt(args[1]));
            return;
        }
        boolean shortThreads = args.length > 0 && args[0].equals("short");
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        for (int n = 1; ; n++) {
            Thread.sleep(1000);
            if (!shortThreads) {
                continue;
            }
            String name = "Short-" + n;
            String prefix = "SHORT " + name + " ";
            Thread brief = new Thread(() -> {
                spin(300_000_000L);
                // Nothing costly after the measure: the sampler's count must end just above it.
                long cpu = mx.getCurrentThreadCpuTime();
                System.out.println(prefix.concat(Long.toString(cpu)));
                System.out.flush();
            }, name);
            brief.start();
        }
    }
}
