import java.util.concurrent.locks.LockSupport;

/**
 * The main thread blocks inside a chain of C2-compiled frames: main -> outer -> middle -> inner,
 * where inner parks. Run it with -XX:-TieredCompilation -Xbatch and
 * -XX:CompileCommand=dontinline,HotSpotCompiled::* so that each method is its own compiled frame.
 * The warm-up parks for 1 ns on the very same path, so that the final long park does not
 * deoptimise anything.
 */
public class HotSpotCompiled {
    static volatile long pause = 1;

    public static void main(String[] args) {
        long sum = 0;
        for (int i = 0; i < 30_000; i++) {
            sum += outer(i);
        }
        pause = Long.MAX_VALUE / 4;
        System.out.println("READY " + sum);
        System.out.flush();
        while (true) {
            sum += outer(1);
        }
    }

    static long outer(int i) {
        return middle(i) + 1;
    }

    static long middle(int i) {
        return inner(i) * 3;
    }

    static long inner(int i) {
        LockSupport.parkNanos(pause);
        return i;
    }
}
