import java.net.URL;
import java.net.URLClassLoader;
import java.util.function.LongUnaryOperator;

/**
 * Phases that each load StacksUnloadA or StacksUnloadB (alternately) in a class loader of their
 * own, run its hot method until it is compiled and busy for a while, then drop the loader and
 * collect, so that the class is unloaded and its compiled code freed (and its addresses reused by
 * the next phase's code). After each phase it prints `PHASE <class> <start> <end>`, the times of
 * System.nanoTime (CLOCK_MONOTONIC on Linux) between which that class's method ran; `PDONE` at
 * the end. Prints `READY <pid>` first. The first argument is the number of phases.
 */
public class StacksUnload {
    static long sink;

    public static void main(String[] args) throws Exception {
        int phases = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        URL classes = StacksUnload.class.getProtectionDomain().getCodeSource().getLocation();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        for (int i = 0; i < phases; i++) {
            String name = i % 2 == 0 ? "StacksUnloadA" : "StacksUnloadB";
            long[] times = runPhase(classes, name);
            System.gc();
            System.out.println("PHASE " + name + " " + times[0] + " " + times[1]);
            System.out.flush();
        }
        System.out.println("PDONE " + sink);
    }

    static long[] runPhase(URL classes, String name) throws Exception {
        try (URLClassLoader loader =
                new URLClassLoader(new URL[] {classes}, ClassLoader.getPlatformClassLoader())) {
            LongUnaryOperator op = (LongUnaryOperator)
                    loader.loadClass(name).getDeclaredConstructor().newInstance();
            long start = System.nanoTime();
            while (System.nanoTime() - start < 400_000_000L) {
                sink += op.applyAsLong(sink);
            }
            return new long[] {start, System.nanoTime()};
        }
    }
}
