/**
 * A fixed 9-deep call chain on the main thread: main -> run -> l1 -> ... -> l6 -> leaf.
 * The leaf does a bounded unit of work and returns, so that the JIT compiles (and inlines) the
 * whole chain under tiered compilation, and every sample of the main thread lands in it.
 * Runs until killed, or for the number of seconds given as the first argument; with `stdin` as the
 * second, also until its standard input ends (a test that has seen enough closes it), and then
 * exits normally.
 */
public class StacksChain {
    static long sink;

    public static void main(String[] args) {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : Long.MAX_VALUE / 2_000_000_000L;
        if (args.length > 1 && args[1].equals("stdin")) {
            EndOfInput.watch();
        }
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        run(System.nanoTime() + seconds * 1_000_000_000L);
        System.out.println("DONE " + sink);
    }

    /**
     * Calls the chain until the deadline. The clock is read once per {@link #CALLS_PER_READ}
     * calls: its cost, which is the VM's own and grows on a virtual machine whose clock is not
     * read in user space, stays a negligible share of this thread's CPU outside the chain.
     */
    static void run(long deadline) {
        while (!EndOfInput.ended && System.nanoTime() < deadline) {
            for (int i = 0; i < CALLS_PER_READ; i++) {
                sink += l1(sink);
            }
        }
    }

    /** Calls of the chain between two reads of the clock. */
    static final int CALLS_PER_READ = 16;

    static long l1(long x) { return l2(x + 1); }
    static long l2(long x) { return l3(x ^ 3); }
    static long l3(long x) { return l4(x + 5); }
    static long l4(long x) { return l5(x ^ 7); }
    static long l5(long x) { return l6(x + 11); }
    static long l6(long x) { return leaf(x ^ 13); }

    static long leaf(long x) {
        long h = x;
        for (int i = 0; i < 20_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
