import java.lang.invoke.MethodHandles;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongUnaryOperator;

/**
 * Hot code in every kind of class and method whose name a profiler must get right: a lambda (a
 * hidden class, and its synthetic body method), a hidden class defined by Lookup.defineHiddenClass,
 * a static nested class, an anonymous class, a generic method, a method of a class in the unnamed
 * module and one of a class in a named module (naming.mod, on the module path: run with
 * `-p <modules> --add-modules naming.mod`).
 *
 * Prints `READY <pid>`, then one line `NAME <class>.<method>` per hot method, with the class named
 * by Java itself (Class.getName, so hidden classes as `NamingHidden/0x...`), then `NAMES END`;
 * then runs each in turn for the number of seconds given as the first argument.
 *
 * Each method has its own copy of the same hot loop (as NamingHidden and naming.mod.ModWork do):
 * a shared helper would be the newest frame of every sample instead of the method to be named.
 */
public class NamingKinds {
    static volatile long sink;

    static final class Inner implements LongUnaryOperator {
        public long applyAsLong(long h) {
            for (int i = 0; i < 20_000; i++) {
                h ^= h << 13;
                h ^= h >>> 7;
                h ^= h << 17;
            }
            return h;
        }
    }

    public static void main(String[] args) throws Throwable {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        LongUnaryOperator lambda = h -> {
            for (int i = 0; i < 20_000; i++) {
                h ^= h << 13;
                h ^= h >>> 7;
                h ^= h << 17;
            }
            return h;
        };
        LongUnaryOperator anonymous = new LongUnaryOperator() {
            public long applyAsLong(long h) {
                for (int i = 0; i < 20_000; i++) {
                    h ^= h << 13;
                    h ^= h >>> 7;
                    h ^= h << 17;
                }
                return h;
            }
        };
        byte[] bytes;
        try (var in = NamingKinds.class.getResourceAsStream("/NamingHidden.class")) {
            bytes = in.readAllBytes();
        }
        Class<?> hiddenClass = MethodHandles.lookup().defineHiddenClass(bytes, true).lookupClass();
        Class<?> moduleClass = Class.forName("naming.mod.ModWork");
        List<LongUnaryOperator> ops = new ArrayList<>();
        ops.add(lambda);
        ops.add(anonymous);
        ops.add(new Inner());
        ops.add((LongUnaryOperator) hiddenClass.getDeclaredConstructor().newInstance());
        ops.add((LongUnaryOperator) moduleClass.getDeclaredConstructor().newInstance());
        System.out.println("READY " + ProcessHandle.current().pid());
        for (LongUnaryOperator op : ops) {
            System.out.println("NAME " + op.getClass().getName() + ".applyAsLong");
        }
        for (Method method : NamingKinds.class.getDeclaredMethods()) {
            if (method.getName().startsWith("lambda$") || method.getName().equals("generic")
                    || method.getName().equals("plain")) {
                System.out.println("NAME " + NamingKinds.class.getName() + "." + method.getName());
            }
        }
        System.out.println("MODULE " + moduleClass.getModule().getName());
        System.out.println("NAMES END");
        System.out.flush();
        while (System.nanoTime() < end) {
            for (LongUnaryOperator op : ops) {
                long slice = System.nanoTime() + 5_000_000L;
                while (System.nanoTime() < slice) {
                    sink = op.applyAsLong(sink);
                }
            }
            long slice = System.nanoTime() + 5_000_000L;
            while (System.nanoTime() < slice) {
                sink = generic(Long.valueOf(sink));
            }
            slice = System.nanoTime() + 5_000_000L;
            while (System.nanoTime() < slice) {
                sink = plain(sink);
            }
        }
    }

    static <T extends Number> long generic(T seed) {
        long h = seed.longValue();
        for (int i = 0; i < 20_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }

    static long plain(long h) {
        for (int i = 0; i < 20_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
