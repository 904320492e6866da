/**
 * A worker thread that runs a lambda (an instance of a hidden class) in a loop. Prints
 * `READY <pid> <the lambda's class name>`, the name Java gives the hidden class
 * (`StacksLambda$$Lambda/0x...`, or `StacksLambda$$Lambda$14/0x...` on Java 17).
 * Runs for the number of seconds given as the first argument; with `stdin` as the second, also
 * until its standard input ends.
 */
public class StacksLambda {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long deadline = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        if (args.length > 1 && args[1].equals("stdin")) {
            EndOfInput.watch();
        }
        Runnable work = () -> {
            while (!EndOfInput.ended && System.nanoTime() < deadline) {
                sink += spin(sink);
            }
        };
        Thread worker = new Thread(work, "lambda-worker");
        worker.start();
        System.out.println("READY " + ProcessHandle.current().pid() + " " + work.getClass().getName());
        System.out.flush();
        worker.join();
        System.out.println("DONE " + sink);
    }

    static long spin(long x) {
        double d = x;
        for (int i = 1; i < 2_000; i++) {
            d = Math.sqrt(d * i + 1.0);
        }
        return (long) d;
    }
}
