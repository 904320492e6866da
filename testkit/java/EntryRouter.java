import java.lang.reflect.Method;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A Spring-style router: two busy threads send requests to a router, which calls the handler of
 * each path as frameworks do: {@code /orders} by reflection ({@link Method#invoke}), {@code /users}
 * through a method reference (a lambda's hidden class). Orders does three times the rounds of
 * Users, with the same loop ({@link RecordSplit#mix}), so the handlers share the CPU 3:1 by
 * construction; the router's own work (two map lookups per request of tens of microseconds) is
 * negligible. Runs until killed.
 */
public class EntryRouter {
    static volatile long sink;

    /** What a handler called through a method reference is. */
    interface Handler {
        long handle(long request) throws Exception;
    }

    /** The handler called by reflection. */
    public static class Orders {
        public long handle(long request) {
            return RecordSplit.mix(request, 3 * 50_000);
        }
    }

    /** The handler called through a method reference. */
    public static class Users {
        public long handle(long request) {
            return RecordSplit.mix(request, 50_000);
        }
    }

    /** Finds each path's handler and calls it: a controller's method, or a function. */
    static class Router {
        final Map<String, Object> controllers = new LinkedHashMap<>();
        final Map<String, Method> methods = new LinkedHashMap<>();
        final Map<String, Handler> functions = new LinkedHashMap<>();

        Router() throws Exception {
            controllers.put("/orders", new Orders());
            methods.put("/orders", Orders.class.getMethod("handle", long.class));
            functions.put("/users", new Users()::handle);
        }

        long route(String path, long request) throws Exception {
            Method method = methods.get(path);
            if (method != null) {
                return (Long) method.invoke(controllers.get(path), request);
            }
            return functions.get(path).handle(request);
        }
    }

    public static void main(String[] args) throws Exception {
        Router router = new Router();
        for (int t = 0; t < 2; t++) {
            Thread worker = new Thread(() -> serve(router), "worker-" + t);
            worker.setDaemon(true);
            worker.start();
        }
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    static void serve(Router router) {
        long h = Thread.currentThread().getId();
        try {
            while (true) {
                h = router.route("/orders", h);
                h = router.route("/users", h);
                sink = h;
            }
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
