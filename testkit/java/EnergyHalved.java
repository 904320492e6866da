/**
 * A paced workload for the comparison of two recordings: every 20 ms a worker thread runs
 * {@code hot} and {@code cold} once each, a fixed amount of work, then waits for the next tick
 * (running late ticks back to back), so that its CPU time per second stays the same whatever
 * else the machine runs. The first argument is hot's cost, the second (default 1) cold's, in
 * rounds of the same loop: hot 2 then 1 is "making it twice as cheap". It runs until killed, and
 * prints READY once the methods are compiled.
 */
public class EnergyHalved {
    static final long TICK_NS = 20_000_000L;
    static final int ROUNDS = 400_000;
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int hotCost = Integer.parseInt(args[0]);
        int coldCost = args.length > 1 ? Integer.parseInt(args[1]) : 1;
        // Warm up, so that the recording sees compiled code from its start
        long h = 1;
        for (int i = 0; i < 200; i++) {
            h = cold(hot(h, hotCost), coldCost);
        }
        sink = h;
        Thread worker = new Thread(() -> work(hotCost, coldCost), "paced");
        worker.setDaemon(true);
        worker.start();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    static void work(int hotCost, int coldCost) {
        long h = Thread.currentThread().getId();
        long next = System.nanoTime();
        while (true) {
            h = hot(h, hotCost);
            h = cold(h, coldCost);
            sink = h;
            next += TICK_NS;
            long wait = next - System.nanoTime();
            if (wait > 0) {
                try {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    static long hot(long h, int cost) {
        for (int i = 0; i < cost * ROUNDS; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }

    static long cold(long h, int cost) {
        for (int i = 0; i < cost * ROUNDS; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
