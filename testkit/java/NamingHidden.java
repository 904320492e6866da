import java.util.function.LongUnaryOperator;

/**
 * NamingKinds defines a hidden class from this class's bytes (Lookup.defineHiddenClass), which Java
 * names `NamingHidden/0x...`.
 */
public class NamingHidden implements LongUnaryOperator {
    public long applyAsLong(long h) {
        for (int i = 0; i < 20_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
