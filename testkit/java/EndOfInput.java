/**
 * Tells a workload when its standard input ends: a test that has seen enough closes it, and the
 * workload then ends normally.
 */
public final class EndOfInput {
    /**
     * Whether the standard input has ended (always false without {@link #watch}); a field, not a
     * method, so that reading it adds no frame to an interpreted workload's stacks.
     */
    public static volatile boolean ended;

    private EndOfInput() {
    }

    /** Starts a daemon thread that reads the standard input to its end. */
    public static void watch() {
        Thread watcher = new Thread(EndOfInput::read, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    private static void read() {
        try {
            while (System.in.read() >= 0) {
                // the input's bytes mean nothing: only its end does
            }
        } catch (java.io.IOException e) {
            // a broken input ends it as well
        }
        ended = true;
    }
}
