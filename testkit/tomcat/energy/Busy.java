package energy;

/** The work of a request: a number of rounds of the same loop, so CPU time follows the rounds. */
final class Busy {
    static volatile long sink;

    private Busy() {}

    static long mix(long h, int rounds) {
        for (int i = 0; i < rounds; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        sink = h;
        return h;
    }
}
