/**
 * Two busy threads, each spending 3/4 of its CPU in {@code heavy} and 1/4 in {@code light}: both
 * methods run the same loop, heavy three times as many rounds per call. Runs until killed.
 */
public class RecordSplit {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        for (int t = 0; t < 2; t++) {
            Thread worker = new Thread(RecordSplit::work, "split-" + t);
            worker.setDaemon(true);
            worker.start();
        }
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    static void work() {
        long h = Thread.currentThread().getId();
        while (true) {
            h = heavy(h);
            h = light(h);
            sink = h;
        }
    }

    static long heavy(long h) {
        return mix(h, 3 * 50_000);
    }

    static long light(long h) {
        return mix(h, 50_000);
    }

    static long mix(long h, int rounds) {
        for (int i = 0; i < rounds; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
