import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;

/**
 * Says which of the methods named on its standard input (`package.Class.method`, one a line) are
 * native, by Java's own reflection: prints those of them that some method of that name in that
 * class is declared native (MethodHandle.invokeBasic, Object.hashCode, ...), one a line. Classes
 * are looked up by the system class loader without being initialised: run it with the program's
 * class path. A name whose class or methods cannot be loaded (a hidden class, a class of another
 * loader) is not printed.
 *
 * <p>Usage: java -cp PROGRAM:WORKLOADS NativeMethods &lt; METHODS
 */
public class NativeMethods {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        ClassLoader loader = ClassLoader.getSystemClassLoader();
        for (String name = in.readLine(); name != null; name = in.readLine()) {
            int dot = name.lastIndexOf('.');
            if (dot <= 0) {
                continue;
            }
            Class<?> type;
            try {
                type = Class.forName(name.substring(0, dot), false, loader);
            } catch (ClassNotFoundException | LinkageError e) {
                continue;
            }
            String method = name.substring(dot + 1);
            Method[] methods;
            try {
                methods = type.getDeclaredMethods();
            } catch (LinkageError e) {
                continue;
            }
            for (Method m : methods) {
                if (m.getName().equals(method) && Modifier.isNative(m.getModifiers())) {
                    System.out.println(name);
                    break;
                }
            }
        }
    }
}
