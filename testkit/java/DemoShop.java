import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The demo of scripts/run.sh: a small "shop" whose two worker threads parse orders, price them
 * with BigDecimal, sign them with SHA-256 and sort them, each step with a different cost, so that
 * the energy report shows a clear split between methods. Runs for the number of seconds given as
 * the first argument (default 10), then exits.
 */
public class DemoShop {
    static final Pattern LINE = Pattern.compile("item=(\\w+);qty=(\\d+);price=(\\d+\\.\\d+)");
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 10;
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            int seed = t;
            Thread worker = new Thread(() -> serve(seed, deadline), "shop-worker-" + t);
            worker.start();
            workers.add(worker);
        }
        System.out.println("READY " + ProcessHandle.current().pid());
        for (Thread worker : workers) {
            worker.join();
        }
        System.out.println("DONE " + sink);
    }

    static void serve(int seed, long deadline) {
        Random random = new Random(seed);
        while (System.nanoTime() < deadline) {
            List<String> orders = receiveOrders(random);
            List<BigDecimal> totals = new ArrayList<>();
            for (String order : orders) {
                totals.add(price(order));
            }
            sink += sign(totals);
            sortTotals(totals);
        }
    }

    static List<String> receiveOrders(Random random) {
        List<String> orders = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            orders.add("item=sku" + random.nextInt(1000) + ";qty=" + (1 + random.nextInt(9))
                    + ";price=" + random.nextInt(500) + "." + (10 + random.nextInt(89)));
        }
        return orders;
    }

    static BigDecimal price(String order) {
        Matcher m = LINE.matcher(order);
        if (!m.matches()) {
            return BigDecimal.ZERO;
        }
        BigDecimal unit = new BigDecimal(m.group(3));
        BigDecimal total = unit.multiply(BigDecimal.valueOf(Long.parseLong(m.group(2))));
        return total.multiply(new BigDecimal("1.2")).setScale(2, RoundingMode.HALF_UP);
    }

    static long sign(List<BigDecimal> totals) {
        try {
            MessageDigest digest = MessageDigest.getInstance("SHA-256");
            byte[] hash = new byte[0];
            for (BigDecimal total : totals) {
                for (int round = 0; round < 20; round++) {
                    digest.update(hash);
                    hash = digest.digest(total.toPlainString().getBytes(StandardCharsets.UTF_8));
                }
            }
            return hash[0];
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static void sortTotals(List<BigDecimal> totals) {
        for (int round = 0; round < 20; round++) {
            Collections.shuffle(totals, new Random(round));
            Collections.sort(totals);
        }
    }
}
