import java.util.ArrayList;
import java.util.List;

/**
 * Two threads that allocate and drop short-lived objects as fast as they can, so that the
 * garbage collector's threads run a lot. Prints `READY <pid>`, runs for the number of seconds
 * given as the first argument (default: until killed); with `stdin` as the second, also until its
 * standard input ends.
 */
public class StacksAlloc {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 1_000_000L;
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        if (args.length > 1 && args[1].equals("stdin")) {
            EndOfInput.watch();
        }
        Runnable allocate = () -> {
            while (!EndOfInput.ended && System.nanoTime() < deadline) {
                List<long[]> list = new ArrayList<>();
                for (int i = 0; i < 10_000; i++) {
                    list.add(new long[16 + (i & 63)]);
                }
                sink += list.size();
            }
        };
        Thread a = new Thread(allocate, "alloc-1");
        Thread b = new Thread(allocate, "alloc-2");
        a.start();
        b.start();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        a.join();
        b.join();
        System.out.println("DONE " + sink);
    }
}
