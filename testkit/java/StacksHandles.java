import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.function.LongUnaryOperator;

/**
 * A worker thread (`handles-worker`) whose hot path goes through method handles that the JIT
 * cannot fold (`invokeExact` and `invoke` on handles read from an array: a static method, a
 * virtual one, an interface one, a constructor) and through a lambda made by invokedynamic, so
 * that much of its time is spent in HotSpot's method-handle intrinsics (`invokeBasic`,
 * `linkToStatic`, `linkToVirtual`, `linkToInterface`, `linkToSpecial`). Prints `READY <pid>`.
 * Runs for the number of seconds given as the first argument; with `stdin` as the second, also
 * until its standard input ends.
 */
public class StacksHandles {
    static volatile long sink;

    /** An interface called through `linkToInterface`. */
    interface Step {
        long step(long x);
    }

    static final class Plus implements Step {
        public long step(long x) {
            return x + 3;
        }
    }

    final long base;

    StacksHandles(long base) {
        this.base = base;
    }

    static long viaStatic(long x) {
        return x * 31 + 7;
    }

    long viaVirtual(long x) {
        return x ^ base;
    }

    public static void main(String[] args) throws Throwable {
        long deadline = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        if (args.length > 1 && args[1].equals("stdin")) {
            EndOfInput.watch();
        }
        MethodHandles.Lookup lookup = MethodHandles.lookup();
        MethodType unary = MethodType.methodType(long.class, long.class);
        MethodHandle[] handles = {
            lookup.findStatic(StacksHandles.class, "viaStatic", unary),
            lookup.findVirtual(StacksHandles.class, "viaVirtual", unary).bindTo(new StacksHandles(5)),
            lookup.findVirtual(Step.class, "step", unary).bindTo(new Plus()),
        };
        MethodHandle make = lookup.findConstructor(
            StacksHandles.class, MethodType.methodType(void.class, long.class));
        LongUnaryOperator lambda = x -> x + (x >>> 3);
        Thread worker = new Thread(() -> work(handles, make, lambda, deadline), "handles-worker");
        worker.start();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        worker.join();
        System.out.println("DONE " + sink);
    }

    static void work(MethodHandle[] handles, MethodHandle make, LongUnaryOperator lambda, long deadline) {
        try {
            long x = 1;
            while (!EndOfInput.ended && System.nanoTime() < deadline) {
                for (int i = 0; i < 1_000; i++) {
                    MethodHandle handle = handles[i % handles.length];
                    x = (long) handle.invokeExact(x);
                    x = (long) (Long) handle.invoke((Object) x);
                    x += ((StacksHandles) make.invoke(x)).base;
                    x = lambda.applyAsLong(x);
                }
                sink += x;
            }
        } catch (Throwable e) {
            throw new RuntimeException(e);
        }
    }
}
