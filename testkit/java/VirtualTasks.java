import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * Thousands of virtual threads doing CPU work in two methods: each task, a lambda submitted to a
 * virtual-thread-per-task executor, runs {@code alpha} (twice the work of {@code beta}), then
 * {@code beta}; with `sleep` as second argument, it sleeps 1 ms between the two, so that it is
 * unmounted from its carrier and mounted again (its frames frozen, then thawed). Java 21 and
 * later only.
 *
 * This file is compiled by javac 17 with --release 17, whose API has no virtual threads: the
 * executor is made by Executors.newVirtualThreadPerTaskExecutor looked up through a MethodHandle,
 * so the same class file runs on the Java 21 and 25 runtimes.
 *
 * Prints `READY <pid>`, runs the number of tasks given as the first argument, then ends.
 */
public class VirtualTasks {
    static volatile long sink;

    public static void main(String[] args) throws Throwable {
        int tasks = Integer.parseInt(args[0]);
        boolean sleep = args.length > 1 && args[1].equals("sleep");
        MethodHandle factory = MethodHandles.publicLookup().findStatic(Executors.class,
                "newVirtualThreadPerTaskExecutor", MethodType.methodType(ExecutorService.class));
        ExecutorService executor = (ExecutorService) factory.invokeExact();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        for (int i = 0; i < tasks; i++) {
            long seed = i;
            executor.submit(() -> {
                long h = alpha(seed);
                if (sleep) {
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                sink = beta(h);
            });
        }
        executor.shutdown();
        if (!executor.awaitTermination(10, TimeUnit.MINUTES)) {
            throw new IllegalStateException("the tasks did not end");
        }
    }

    static long alpha(long h) {
        for (int i = 0; i < 400_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }

    static long beta(long h) {
        for (int i = 0; i < 200_000; i++) {
            h ^= h << 13;
            h ^= h >>> 7;
            h ^= h << 17;
        }
        return h;
    }
}
