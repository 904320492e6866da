/**
 * A steady busy main loop in {@code steady}, and beside it a new thread every 20 ms that is busy
 * in {@code brief} for about 15 ms and ends. Runs until killed.
 */
public class RecordShortLived {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Thread spawner = new Thread(RecordShortLived::spawn, "spawner");
        spawner.setDaemon(true);
        spawner.start();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        steady();
    }

    static void spawn() {
        while (true) {
            Thread t = new Thread(RecordShortLived::brief, "brief");
            t.setDaemon(true);
            t.start();
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static void brief() {
        long end = System.nanoTime() + 15_000_000L;
        long h = 7;
        while (System.nanoTime() < end) {
            h = spin(h);
        }
        sink = h;
    }

    static void steady() {
        long h = 1;
        while (true) {
            h = spin(h);
            sink = h;
        }
    }

    static long spin(long h) {
        for (int i = 0; i < 1000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
