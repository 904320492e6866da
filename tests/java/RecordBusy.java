/**
 * N busy threads (the first argument, default 1) in {@code burn}, and a few sleeping ones.
 * Runs until killed, or for the number of seconds given as the second argument.
 */
public class RecordBusy {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 1;
        long seconds = args.length > 1 ? Long.parseLong(args[1]) : 1_000_000L;
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(RecordBusy::burn, "busy-" + t);
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

    static void burn() {
        long h = 1;
        while (true) {
            for (int i = 0; i < 10_000; i++) {
                h ^= h << 13;
                h ^= h >>> 7;
                h ^= h << 17;
            }
            sink = h;
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
