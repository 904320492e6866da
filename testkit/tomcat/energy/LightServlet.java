package energy;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;

/** A third of the rounds of {@link HeavyServlet} per request. */
public class LightServlet extends HttpServlet {
    /** Rounds per request: about a millisecond, so that Tomcat's own work per request is small. */
    static final int ROUNDS = 1_000_000;

    @Override
    protected void doGet(HttpServletRequest request, HttpServletResponse response)
            throws IOException {
        response.setContentType("text/plain");
        response.getWriter().println(Busy.mix(System.nanoTime(), ROUNDS));
    }
}
