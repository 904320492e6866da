/**
 * A busy JVM for the tests of what people read (userspace/tests/views/printed.rs): its busy
 * thread is named with an escape sequence, a bell and a bidi override, and its hot method's name
 * {@code hotZZZZYYXXXend} is a placeholder that the test patches in the class file, at the same
 * length, into {@code hot ESC [2J BEL LF U+202E end}: a name no Java source can hold, but a class
 * file may (HotSpot loads it with -XX:-BytecodeVerificationRemote). Runs for the number of
 * seconds given (default 60).
 */
public class PrintedNames {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 60;
        Thread worker = new Thread(PrintedNames::burn, "w\u001b[2J\u0007\u202e");
        worker.setDaemon(true);
        worker.start();
        System.out.println("READY " + ProcessHandle.current().pid());
        System.out.flush();
        Thread.sleep(seconds * 1000);
    }

    static void burn() {
        long h = 1;
        while (true) {
            h = hotZZZZYYXXXend(h);
            sink = h;
        }
    }

    static long hotZZZZYYXXXend(long h) {
        for (int i = 0; i < 1_000_000; i++) {
            h = h * 31 + i;
        }
        return h;
    }
}
