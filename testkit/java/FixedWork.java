import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A benchmark of fixed work: {@code units} units, each of {@code cost} rounds of arithmetic, on
 * the main thread; then, when a path is given, writes the number of units done there (as a
 * benchmark tells {@code report --per @FILE} its units of work) and ends. The same units at cost
 * 1 take half the CPU time of cost 2.
 *
 * <p>Usage: {@code FixedWork <cost> <units> [<units file>]}
 */
public class FixedWork {
    static long sink;

    static long unit(int cost) {
        long x = sink | 1;
        for (int round = 0; round < cost; round++) {
            for (int i = 0; i < 1_000_000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
                x ^= x >>> 29;
            }
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        int cost = Integer.parseInt(args[0]);
        int units = Integer.parseInt(args[1]);
        for (int done = 0; done < units; done++) {
            sink += unit(cost);
        }
        if (args.length > 2) {
            Files.writeString(Path.of(args[2]), units + "\n");
        }
        System.out.println("DONE " + units + " " + sink);
    }
}
