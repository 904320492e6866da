import java.util.concurrent.locks.LockSupport;

/**
 * Many parked threads beside a few busy ones, until killed: {@code parked} threads park for good
 * in {@code idle} (first argument), {@code busy} threads (second argument, 0 for an idle JVM)
 * spin in {@code spin}. Prints READY and its pid once every thread has started.
 */
public class FallbackParked {
    static volatile long sink;

    public static void main(String[] args) {
        int parked = Integer.parseInt(args[0]);
        int busy = Integer.parseInt(args[1]);
        for (int i = 0; i < parked; i++) {
            Thread thread = new Thread(FallbackParked::idle, "parked-" + i);
            thread.setDaemon(true);
            thread.start();
        }
        for (int i = 0; i < busy; i++) {
            Thread thread = new Thread(FallbackParked::spin, "busy-" + i);
            thread.setDaemon(true);
            thread.start();
        }
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        idle();
    }

    static void idle() {
        while (true) {
            LockSupport.park();
        }
    }

    static void spin() {
        long h = Thread.currentThread().getId();
        while (true) {
            for (int i = 0; i < 100_000; i++) {
                h ^= h << 13;
                h ^= h >>> 7;
                h ^= h << 17;
            }
            sink = h;
        }
    }
}
