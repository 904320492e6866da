import java.util.function.LongUnaryOperator;

/** A payload of StacksUnload, loaded and unloaded with its own class loader. */
public class StacksUnloadB implements LongUnaryOperator {
    @Override
    public long applyAsLong(long x) {
        return work(x);
    }

    static long work(long x) {
        long h = x;
        int i = 0;
        do {
            h = h * 6364136223846793005L + 1442695040888963407L;
        } while (++i < 8_000);
        return h;
    }
}
