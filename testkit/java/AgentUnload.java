import java.lang.ref.WeakReference;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;

/**
 * Loads AgentUnloadPayload with a class loader of its own, runs it hot for two seconds (it gets
 * compiled), prints READY, drops the loader, runs System.gc() until the class is unloaded, prints
 * UNLOADED, then keeps calling System.gc() so that the JVM frees the compiled code.
 */
public class AgentUnload {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        URL classes = AgentUnload.class.getProtectionDomain().getCodeSource().getLocation();
        WeakReference<Class<?>> payload = runHot(classes);
        System.out.println("READY");
        while (payload.get() != null) {
            System.gc();
            Thread.sleep(50);
        }
        System.out.println("UNLOADED");
        while (true) {
            System.gc();
            Thread.sleep(200);
        }
    }

    static WeakReference<Class<?>> runHot(URL classes) throws Exception {
        URLClassLoader loader = new URLClassLoader(new URL[] {classes}, null);
        Class<?> type = loader.loadClass("AgentUnloadPayload");
        Method spin = type.getMethod("spin", int.class);
        long end = System.nanoTime() + 2_000_000_000L;
        while (System.nanoTime() < end) {
            sink += (long) spin.invoke(null, 10_000);
        }
        loader.close();
        return new WeakReference<>(type);
    }
}
