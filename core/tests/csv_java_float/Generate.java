import java.util.Locale;
import java.util.Random;

/**
 * Writes expected.txt for the test csv_java_float: doubles (as their bits in hex) and how Java's
 * String.format(Locale.ROOT, "%.Nf") writes them for N = 0, 1, 4 and 9. Run it with any JDK:
 * javac Generate.java && java Generate > expected.txt (OpenJDK 17, 21 and 25 give the same file).
 */
public class Generate {
    public static void main(String[] args) {
        Random random = new Random(20261130L);
        double[] edges = {0.0, -0.0, 0.5, 1.5, 2.5, 0.03125, -0.03125, 0.15, 0.35, 1.005, 0.125, 0.00005, 0.00015,
            0.9999999995, 9.99995, 0.1234567895, 1e-10, 5e-324, Double.MIN_NORMAL, 1e21, 1e22, 123456789.123456789,
            Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, 4503599627370496.5, 9007199254740993.0};
        for (double d : edges) {
            print(d);
        }
        for (int i = 0; i < 3000; i++) {
            double d;
            switch (i % 6) {
                // Uniform values at magnitudes from 1e-12 to 1e6
                case 0 -> d = random.nextDouble() * Math.pow(10, random.nextInt(19) - 12);
                // Decimal ties on the 1st to 12th place: x.xxxx5
                case 1 -> d = (random.nextInt(1_000_000) * 10 + 5) / Math.pow(10, 1 + random.nextInt(12));
                // Binary fractions, exact ties at some precision
                case 2 -> d = random.nextInt(1 << 20) / Math.pow(2, random.nextInt(40));
                // Powers of ten and their neighbours
                case 3 -> d = Math.nextAfter(Math.pow(10, random.nextInt(30) - 15), random.nextBoolean() ? 0 : 1e300);
                // Any finite bits with a moderate exponent, either sign
                case 4 -> {
                    long bits = random.nextLong() & 0x800FFFFFFFFFFFFFL | ((long) (1023 + random.nextInt(60) - 40) << 52);
                    d = Double.longBitsToDouble(bits);
                }
                // Products as the writer computes them: power times interval
                default -> d = (random.nextDouble() * 100) * (0.5 + random.nextDouble());
            }
            print(d);
        }
        // Values of 17 significant digits with binary fractions, many halfway between two
        // shortest decimals (Java takes the even one); kept below 1e15, where OpenJDK 17 agrees
        Random ties = new Random(20261130L + 1);
        for (int i = 0; i < 2000; i++) {
            print((ties.nextLong() >> 14) / Math.pow(2, 8 + ties.nextInt(12)));
        }
    }

    private static void print(double d) {
        System.out.println(Long.toHexString(Double.doubleToRawLongBits(d)) + " "
            + String.format(Locale.ROOT, "%.0f %.1f %.4f %.9f", d, d, d, d));
    }
}
