/**
 * A server's threads for measuring the profiler's own cost: N threads (first argument, default
 * 200) that each do a short piece of work (second argument, microseconds of CPU, default 100) then
 * sleep a few milliseconds (third argument, default 20), as request handlers do, so that the
 * machine switches context thousands of times a second. With 0 microseconds of work the threads
 * park for good instead (an idle server). Prints READY and its pid once every thread has started;
 * runs until killed.
 */
public class CostServer {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        long workNs = (args.length > 1 ? Long.parseLong(args[1]) : 100) * 1000;
        long sleepMs = args.length > 2 ? Long.parseLong(args[2]) : 20;
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> serve(workNs, sleepMs), "handler-" + t);
            worker.setDaemon(true);
            worker.start();
        }
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    static void serve(long workNs, long sleepMs) {
        long h = 1;
        while (true) {
            if (workNs == 0) {
                java.util.concurrent.locks.LockSupport.park();
                continue;
            }
            long end = System.nanoTime() + workNs;
            while (System.nanoTime() < end) {
                h = h * 6364136223846793005L + 1442695040888963407L;
            }
            sink = h;
            try {
                Thread.sleep(sleepMs);
            } catch (InterruptedException e) {
                return;
            }
        }
    }
}
