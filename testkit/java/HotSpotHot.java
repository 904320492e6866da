/**
 * Two hot methods, called in a loop forever so that the JIT compiles them: compute and mix.
 * Prints READY once the loop has run long enough for the compilers to see them.
 */
public class HotSpotHot {
    static long sink;

    public static void main(String[] args) {
        long total = 0;
        for (long i = 0; ; i++) {
            total += compute(i) ^ mix(total);
            if (i == 200_000) {
                System.out.println("READY");
                System.out.flush();
            }
            if ((i & 0xFFFFF) == 0) {
                sink = total;
            }
        }
    }

    static long compute(long x) {
        long acc = x;
        for (int k = 0; k < 50; k++) {
            acc = acc * 6364136223846793005L + 1442695040888963407L;
        }
        return acc;
    }

    static long mix(long x) {
        x ^= x >>> 33;
        x *= 0xff51afd7ed558ccdL;
        x ^= x >>> 33;
        return x;
    }
}
