import java.util.Arrays;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/**
 * The JDK's javac, run in this JVM again and again on the sources given, for the seconds given: a
 * real program whose JIT compiles and inlines thousands of methods, for the benchmarks of naming
 * compiled frames. Prints READY once javac is loaded, then DONE and the number of compilations.
 *
 * <p>Usage: {@code JavacLoop SECONDS OUT_DIR SOURCE...}
 */
public class JavacLoop {
    public static void main(String[] args) {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        String[] javacArgs = new String[args.length];
        javacArgs[0] = "-d";
        javacArgs[1] = args[1];
        System.arraycopy(args, 2, javacArgs, 2, args.length - 2);
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        int rounds = 0;
        while (System.nanoTime() < end) {
            if (javac.run(null, null, null, javacArgs) != 0) {
                throw new IllegalStateException("javac failed on " + Arrays.toString(javacArgs));
            }
            rounds++;
        }
        System.out.println("DONE " + rounds);
    }
}
