package naming.mod;

import java.util.function.LongUnaryOperator;

/** Hot code in a class of the named module naming.mod (see NamingKinds). */
public class ModWork implements LongUnaryOperator {
    public long applyAsLong(long h) {
        for (int i = 0; i < 20_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
