import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.reflect.Method;

/**
 * Runs Java code in classes it generates at run time, for the daemon's tests. The first argument
 * is the mode, the second the number of seconds to run (default: until killed):
 * <ul>
 *   <li>{@code crafted}: one class and method whose names are crafted to break a metrics
 *       exposition format: quotes, backslashes, a newline, and over 100 kB together;</li>
 *   <li>{@code many}: a new class every 10 ms, each in its own class loader, each run for 5 ms:
 *       ever new distinct stacks, at a steady rate (100 classes a second, not more as the JIT
 *       warms up, so that whatever a profiler keeps of the last seconds has a steady size); the
 *       classes no longer used are unloaded every 2 s (System.gc()).</li>
 * </ul>
 * The classes are written byte by byte (class file version 49, which needs no stack map): one
 * public static method {@code int NAME(int n)} that counts up to {@code n}.
 */
public class DaemonGenerated {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "many";
        long seconds = args.length > 1 ? Long.parseLong(args[1]) : 1_000_000L;
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        System.out.println("READY " + ProcessHandle.current().pid());
        if (mode.equals("crafted")) {
            String className = "Crafted\"quote\\back\nline" + "C".repeat(60_000);
            String methodName = "burn\"\\\n" + "m".repeat(50_000);
            Method method = load(className, methodName);
            while (System.nanoTime() < end) {
                sink += (int) method.invoke(null, 1_000_000);
            }
        } else {
            long tick = System.nanoTime();
            for (long i = 0; System.nanoTime() < end; i++) {
                // Unloads the classes no longer used: the JVM's own code and classes then stay
                // about the same size, as a long-lived service's do, and so may the profiler's
                // view of them. Left to allocation, this program's few GCs would keep every class
                // and its code for minutes.
                if (i % 200 == 199) {
                    System.gc();
                }
                Method method = load("Gen" + i, "work" + (i % 7));
                long sliceEnd = System.nanoTime() + 5_000_000L;
                while (System.nanoTime() < sliceEnd) {
                    sink += (int) method.invoke(null, 20_000);
                }
                // The next class at the next 10 ms tick; late (a busy machine), from now on.
                tick += 10_000_000L;
                long wait = tick - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
                } else {
                    tick = System.nanoTime();
                }
            }
        }
    }

    /** Defines the class {@code className} with the method {@code methodName} in a new loader. */
    static Method load(String className, String methodName) throws Exception {
        byte[] bytes = classFile(className, methodName);
        ClassLoader loader = new ClassLoader(DaemonGenerated.class.getClassLoader()) {
            @Override
            protected Class<?> findClass(String name) throws ClassNotFoundException {
                if (!name.equals(className)) {
                    throw new ClassNotFoundException(name);
                }
                return defineClass(name, bytes, 0, bytes.length);
            }
        };
        return loader.loadClass(className).getMethod(methodName, int.class);
    }

    static byte[] classFile(String className, String methodName) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(buffer);
        out.writeInt(0xCAFEBABE);
        out.writeShort(0);
        out.writeShort(49);
        out.writeShort(8); // constant pool count + 1
        out.writeByte(1);
        out.writeUTF(className); // #1
        out.writeByte(7);
        out.writeShort(1); // #2 this class
        out.writeByte(1);
        out.writeUTF("java/lang/Object"); // #3
        out.writeByte(7);
        out.writeShort(3); // #4 super class
        out.writeByte(1);
        out.writeUTF(methodName); // #5
        out.writeByte(1);
        out.writeUTF("(I)I"); // #6
        out.writeByte(1);
        out.writeUTF("Code"); // #7
        out.writeShort(0x0021); // public super
        out.writeShort(2);
        out.writeShort(4);
        out.writeShort(0); // interfaces
        out.writeShort(0); // fields
        out.writeShort(1); // methods
        out.writeShort(0x0009); // public static
        out.writeShort(5);
        out.writeShort(6);
        out.writeShort(1); // attributes
        byte[] code = {
            0x03, // iconst_0
            0x3c, // istore_1
            (byte) 0x84, 0x01, 0x01, // loop: iinc 1 1
            0x1b, // iload_1
            0x1a, // iload_0
            (byte) 0xa1, (byte) 0xff, (byte) 0xfb, // if_icmplt loop (-5)
            0x1b, // iload_1
            (byte) 0xac, // ireturn
        };
        out.writeShort(7);
        out.writeInt(2 + 2 + 4 + code.length + 2 + 2);
        out.writeShort(2); // max stack
        out.writeShort(2); // max locals
        out.writeInt(code.length);
        out.write(code);
        out.writeShort(0); // exception table
        out.writeShort(0); // the code's attributes
        out.writeShort(0); // the class's attributes
        out.flush();
        return buffer.toByteArray();
    }
}
