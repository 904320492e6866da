/**
 * A deep stack that mixes interpreted and compiled frames: main -> c -> i -> c -> i ... -> leaf,
 * as deep as the first argument says (20 without one), where `i` is kept interpreted and nothing
 * is inlined when the JVM runs with
 * `-XX:CompileCommand=exclude,StacksDeep.i -XX:CompileCommand=dontinline,StacksDeep::*`.
 * Prints `READY <pid>` and runs until killed.
 */
public class StacksDeep {
    static long sink;
    static int depth = 20;

    public static void main(String[] args) {
        if (args.length > 0) {
            depth = Integer.parseInt(args[0]);
        }
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        while (true) {
            sink += c(0, sink);
        }
    }

    static long c(int level, long x) {
        return level >= depth ? leaf(x) : i(level + 1, x + 1);
    }

    static long i(int level, long x) {
        return level >= depth ? leaf(x) : c(level + 1, x ^ 5);
    }

    static long leaf(long x) {
        long h = x;
        for (int k = 0; k < 100_000; k++) {
            h = Long.rotateLeft(h, 5) ^ (h >>> 3) ^ k;
        }
        return h;
    }
}
