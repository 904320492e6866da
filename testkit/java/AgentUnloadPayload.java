/**
 * Code that AgentUnload loads with its own class loader, runs hot until it is compiled (C1 then
 * C2), then drops so that its class and compiled code are unloaded.
 */
public class AgentUnloadPayload {
    static long step(long x) {
        return (x * 0x9E3779B97F4A7C15L) ^ (x >>> 29);
    }

    public static long spin(int n) {
        long acc = 1;
        for (int i = 0; i < n; i++) {
            acc = step(acc + i);
        }
        return acc;
    }
}
