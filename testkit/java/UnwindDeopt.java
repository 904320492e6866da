import jdk.test.whitebox.WhiteBox;

/**
 * Compiled code invalidated while it runs: thread "deopt" runs loop -> a -> b -> c, where c does
 * the work, and thread "osr" spins in one long loop (compiled on stack replacement), while thread
 * "deoptimizer" deoptimises every compiled method every 50 ms through HotSpot's WhiteBox API,
 * frames on the stacks included (their return addresses lead to the deoptimisation handler).
 * Needs -XX:+UnlockDiagnosticVMOptions -XX:+WhiteBoxAPI -Xbootclasspath/a:<the WhiteBox class>.
 * Prints READY once the deoptimiser has run for a second, then runs for the seconds given, then
 * prints `DONE <deoptimisations>`.
 */
public class UnwindDeopt {
    static volatile long sink;
    static volatile long deoptimisations;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : Long.MAX_VALUE / 2_000_000_000L;
        WhiteBox wb = WhiteBox.getWhiteBox();
        start("deopt", UnwindDeopt::loop);
        start("osr", UnwindDeopt::osr);
        start("deoptimizer", () -> {
            while (true) {
                sleep(50);
                wb.deoptimizeAll();
                deoptimisations++;
            }
        });
        Thread.sleep(1000);
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        Thread.sleep(seconds * 1000);
        System.out.println("DONE " + deoptimisations);
        System.exit(0);
    }

    static void start(String name, Runnable body) {
        Thread thread = new Thread(body, name);
        thread.setDaemon(true);
        thread.start();
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    static void loop() {
        while (true) {
            sink += a(sink);
        }
    }

    static long a(long x) {
        return b(x + 1) ^ x;
    }

    static long b(long x) {
        return c(x * 3) + 1;
    }

    static long c(long x) {
        long h = x;
        for (int i = 0; i < 200_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }

    static void osr() {
        long h = 1;
        while (true) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
            if (h == 42) {
                sink = h;
            }
        }
    }
}
