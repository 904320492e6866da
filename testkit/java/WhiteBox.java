package jdk.test.whitebox;

/**
 * The one method of HotSpot's WhiteBox testing API that the tests use (the JVM registers the
 * natives of a class of this name when run with -XX:+UnlockDiagnosticVMOptions -XX:+WhiteBoxAPI
 * and the class on -Xbootclasspath/a; it warns about every other native it knows, which
 * -XX:-PrintWarnings silences).
 */
public class WhiteBox {
    private static native void registerNatives();

    static {
        registerNatives();
    }

    private static final WhiteBox INSTANCE = new WhiteBox();

    private WhiteBox() {
    }

    public static WhiteBox getWhiteBox() {
        return INSTANCE;
    }

    /** Deoptimises every compiled method, OSR ones included, with frames on stacks. */
    public native void deoptimizeAll();
}
