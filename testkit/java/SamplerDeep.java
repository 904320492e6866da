/**
 * Sampler workload: thread "Deep" runs a 9-deep call chain (d1 calls d2 ... calls d9) whose leaf
 * spins forever. Prints READY once it runs.
 */
public class SamplerDeep {
    static volatile long sink;

    static void d1() { d2(); }
    static void d2() { d3(); }
    static void d3() { d4(); }
    static void d4() { d5(); }
    static void d5() { d6(); }
    static void d6() { d7(); }
    static void d7() { d8(); }
    static void d8() { d9(); }

    static void d9() {
        long x = 1;
        while (true) {
            for (int i = 0; i < 10_000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
            sink = x;
        }
    }

    public static void main(String[] args) throws Exception {
        Thread deep = new Thread(SamplerDeep::d1, "Deep");
        deep.setDaemon(true);
        deep.start();
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
