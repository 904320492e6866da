/**
 * A hot chain of small methods that C2 compiles with inlining: work -> outer -> middle -> inner.
 * Prints STARTED at once, READY once it has run for two seconds (its code compiled, for the tests
 * that attach to a JVM whose code is compiled already); with an argument N, ends normally after N seconds
 * (printing DONE), else runs until killed; with `stdin` after N, also once its standard input
 * ends.
 */
public class AgentHot {
    static volatile long sink;

    static long inner(long x) {
        return x * 31 + 7;
    }

    static long middle(long x) {
        long sum = 0;
        for (int i = 0; i < 8; i++) {
            sum += inner(x + i);
        }
        return sum;
    }

    static long outer(long x) {
        return middle(x) ^ middle(x + 1);
    }

    static long work(int n) {
        long acc = 0;
        for (int i = 0; i < n; i++) {
            acc += outer(i);
        }
        return acc;
    }

    public static void main(String[] args) {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 0;
        if (args.length > 1 && args[1].equals("stdin")) {
            EndOfInput.watch();
        }
        System.out.println("STARTED");
        System.out.flush();
        long start = System.nanoTime();
        boolean ready = false;
        while (true) {
            sink += work(100_000);
            long elapsed = System.nanoTime() - start;
            if (!ready && elapsed > 2_000_000_000L) {
                System.out.println("READY");
                ready = true;
            }
            if (seconds > 0 && elapsed > seconds * 1_000_000_000L || EndOfInput.ended) {
                break;
            }
        }
        System.out.println("DONE");
    }
}
