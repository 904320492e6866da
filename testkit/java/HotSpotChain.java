/**
 * The main thread sits blocked in a known 9-deep chain: main -> run -> l1 .. l6 -> leaf, where
 * leaf sleeps. A second thread, "lambda", sleeps in a lambda (a hidden class since JDK 15). Run it
 * under -Xint so that every frame is interpreted.
 */
public class HotSpotChain {
    public static void main(String[] args) throws Exception {
        Thread lambda = new Thread(() -> sleepForever(), "lambda");
        lambda.setDaemon(true);
        lambda.start();
        new HotSpotChain().run();
    }

    static void sleepForever() {
        try {
            while (true) {
                Thread.sleep(60_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    void run() throws Exception {
        l1();
    }

    void l1() throws Exception {
        l2();
    }

    void l2() throws Exception {
        l3();
    }

    void l3() throws Exception {
        l4();
    }

    void l4() throws Exception {
        l5();
    }

    void l5() throws Exception {
        l6();
    }

    void l6() throws Exception {
        leaf();
    }

    void leaf() throws Exception {
        System.out.println("READY");
        System.out.flush();
        while (true) {
            Thread.sleep(60_000);
        }
    }
}
