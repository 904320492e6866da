import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * For the test of the agent's lease: the hot chain of AgentHot (work -> outer -> middle -> inner,
 * which C2 inlines: only the agent's code map names the inlined methods) on the main thread, and
 * on a thread "churn" the JIT kept busy for as long as it runs: AgentUnloadPayload loaded again by
 * a new class loader every 100 ms and run until it is compiled, the old loaders unloaded by a
 * System.gc() every second, so that compiled code keeps being loaded and freed. Prints READY at
 * once and runs until killed.
 *
 * <p>The hot chain starts once the agent's code map is there (a minute at most): C2 then compiles
 * it with the debug information of every instruction that the agent turns on, which names the
 * inlined methods wherever the pc is. Code compiled before the agent came has it at safepoints
 * only, where the chain's loop polls in work, and would be named work alone for as long as C2
 * does not compile it again.
 */
public class AgentLease {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        URL classes = AgentLease.class.getProtectionDomain().getCodeSource().getLocation();
        Thread churn = new Thread(() -> churn(classes), "churn");
        churn.setDaemon(true);
        churn.start();
        System.out.println("READY");
        System.out.flush();
        Path map = Path.of("/tmp/joularcode-" + ProcessHandle.current().pid() + ".map");
        for (int waited = 0; waited < 600 && !Files.exists(map); waited++) {
            Thread.sleep(100);
        }
        while (true) {
            sink += AgentHot.work(100_000);
        }
    }

    static void churn(URL classes) {
        try {
            for (long loaded = 1; ; loaded++) {
                try (URLClassLoader loader = new URLClassLoader(new URL[] {classes}, null)) {
                    Method spin = loader.loadClass("AgentUnloadPayload").getMethod("spin", int.class);
                    for (int i = 0; i < 200; i++) {
                        sink += (long) spin.invoke(null, 2_000);
                    }
                }
                if (loaded % 10 == 0) {
                    System.gc();
                }
                Thread.sleep(100);
            }
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }
}
