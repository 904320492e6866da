/**
 * Runs the JDK's javac (com.sun.tools.javac.Main) with the arguments given, between two lines that
 * say when it ran, on CLOCK_MONOTONIC (System.nanoTime): `START <ns>` and `END <ns> <exit code>`.
 * On a JDK without javac, put JDK 17's jdk.compiler and jdk.internal.opt classes on the class path
 * and give javac `--system <JDK 17>`.
 */
public class JavacRun {
    public static void main(String[] args) {
        System.out.println("START " + System.nanoTime());
        System.out.flush();
        int code = com.sun.tools.javac.Main.compile(args);
        System.out.println("END " + System.nanoTime() + " " + code);
        System.out.flush();
    }
}
