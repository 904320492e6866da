import java.util.function.LongUnaryOperator;

/** A payload of StacksUnload, loaded and unloaded with its own class loader. */
public class StacksUnloadA implements LongUnaryOperator {
    @Override
    public long applyAsLong(long x) {
        return work(x);
    }

    static long work(long x) {
        long h = x | 1;
        for (int i = 0; i < 5_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
