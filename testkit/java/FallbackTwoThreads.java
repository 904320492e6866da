/**
 * Two busy threads for the given number of seconds, then an orderly end: {@code alpha} spends
 * its time in {@code alpha}, {@code beta} in {@code beta}, each on a thread of its own.
 */
public class FallbackTwoThreads {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        Thread alpha = new Thread(() -> alpha(end), "alpha");
        Thread beta = new Thread(() -> beta(end), "beta");
        alpha.start();
        beta.start();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        alpha.join();
        beta.join();
    }

    static void alpha(long end) {
        long h = 1;
        while (System.nanoTime() < end) {
            h = mix(h);
        }
        sink = h;
    }

    static void beta(long end) {
        long h = 2;
        while (System.nanoTime() < end) {
            h = mix(h);
        }
        sink = h;
    }

    static long mix(long h) {
        for (int i = 0; i < 10_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
