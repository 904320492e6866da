import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The self-time oracle: two worker threads run four phases in turn, each a method of its own
 * doing one kind of work ({@code arithmetic}: floating-point math; {@code allocation}: short-lived
 * arrays; {@code hashing}: a hash over a byte array; {@code strings}: a StringBuilder), and time
 * each call with their own CPU clock ({@code ThreadMXBean.getCurrentThreadCpuTime}), so that
 * each phase's true share of the workers' CPU is known. The phases take unequal shares, each
 * about a fifth to a third. Each call does a random amount of work, from half to one and a half
 * times its phase's mean (about a millisecond), so that the phases do not come back at a fixed
 * period, which a sampler that fires at fixed steps (the kernel's tick) could alias with.
 *
 * <p>Arguments: the CPU seconds each worker runs, and a file. When both workers are done it writes
 * there, and prints, one line {@code PHASE <method> <CPU ns>} per phase (both workers summed),
 * then ends.
 */
public class SelfTimed {
    static final String[] PHASES = {"arithmetic", "allocation", "hashing", "strings"};
    static final ThreadMXBean CLOCK = ManagementFactory.getThreadMXBean();
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long budget = (long) (Double.parseDouble(args[0]) * 1e9);
        Path out = Path.of(args[1]);
        long[][] times = new long[2][PHASES.length];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < times.length; t++) {
            long[] mine = times[t];
            Thread worker = new Thread(() -> work(budget, mine), "self-timed-" + t);
            worker.start();
            workers.add(worker);
        }
        for (Thread worker : workers) {
            worker.join();
        }
        StringBuilder lines = new StringBuilder();
        for (int p = 0; p < PHASES.length; p++) {
            lines.append("PHASE SelfTimed.").append(PHASES[p]).append(' ')
                .append(times[0][p] + times[1][p]).append('\n');
        }
        Files.writeString(out, lines);
        System.out.print(lines);
        System.out.println("DONE " + sink);
    }

    /** Runs the phases in turn until this thread has spent {@code budget} ns of CPU in them. */
    static void work(long budget, long[] times) {
        long spent = 0;
        long h = Thread.currentThread().getId();
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (spent < budget) {
            for (int p = 0; p < PHASES.length; p++) {
                int percent = random.nextInt(50, 151);
                long start = CLOCK.getCurrentThreadCpuTime();
                switch (p) {
                    case 0 -> h = arithmetic(h, 1_500 * percent);
                    case 1 -> h = allocation(h, 600 * percent);
                    case 2 -> h = hashing(h, 18 * percent / 100);
                    default -> h = strings(h, 400 * percent);
                }
                long took = CLOCK.getCurrentThreadCpuTime() - start;
                times[p] += took;
                spent += took;
            }
            sink = h;
        }
    }

    static long arithmetic(long h, int rounds) {
        double d = (h & 0xff) + 1.0;
        for (int i = 1; i < rounds; i++) {
            d = Math.sqrt(d * i + 1.0) + d * 1e-9;
        }
        return h + (long) d;
    }

    static long allocation(long h, int rounds) {
        long sum = h;
        for (int i = 0; i < rounds; i++) {
            long[] a = new long[8 + (i & 15)];
            a[i & 7] = sum;
            sum += a.length + a[(int) (sum & 7)];
        }
        return sum;
    }

    static final byte[] DATA = new byte[64 * 1024];

    static long hashing(long h, int passes) {
        long x = h | 1;
        for (int pass = 0; pass < passes; pass++) {
            for (byte b : DATA) {
                x = (x ^ b) * 0x100000001b3L;
            }
            DATA[(int) (x & (DATA.length - 1))] ^= (byte) x;
        }
        return x;
    }

    static long strings(long h, int rounds) {
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < rounds; i++) {
            s.append(i ^ h).append(',');
            if (s.length() > 4096) {
                h += s.length();
                s.setLength(0);
            }
        }
        return h + s.length();
    }
}
