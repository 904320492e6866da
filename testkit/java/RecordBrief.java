/**
 * A short program: prints READY, keeps its main thread busy in {@code burn} for the milliseconds
 * given as the first argument (default 500), then exits with the status given as the second
 * (default 0).
 */
public class RecordBrief {
    static volatile long sink;

    public static void main(String[] args) {
        long millis = args.length > 0 ? Long.parseLong(args[0]) : 500;
        int status = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        burn(millis);
        System.exit(status);
    }

    static void burn(long millis) {
        long end = System.nanoTime() + millis * 1_000_000L;
        long h = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                h ^= h << 13;
                h ^= h >>> 7;
                h ^= h << 17;
            }
        }
        sink = h;
    }
}
