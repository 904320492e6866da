/**
 * A deep stack that mixes interpreted and compiled frames: main -> c -> i -> c -> i ... (20 deep)
 * -> leaf, where `i` is kept interpreted and nothing is inlined when the JVM runs with
 * `-XX:CompileCommand=exclude,StacksDeep.i -XX:CompileCommand=dontinline,StacksDeep::*`.
 * Prints `READY <pid>` and runs until killed.
 */
public class StacksDeep {
    static long sink;

    public static void main(String[] args) {
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        while (true) {
            sink += c(0, sink);
        }
    }

    static long c(int depth, long x) {
        return depth >= 20 ? leaf(x) : i(depth + 1, x + 1);
    }

    static long i(int depth, long x) {
        return depth >= 20 ? leaf(x) : c(depth + 1, x ^ 5);
    }

    static long leaf(long x) {
        long h = x;
        for (int k = 0; k < 3_000; k++) {
            h = Long.rotateLeft(h, 5) ^ (h >>> 3) ^ k;
        }
        return h;
    }
}
