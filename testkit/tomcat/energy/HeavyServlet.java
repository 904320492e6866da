package energy;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;

/** Three times the rounds of {@link LightServlet} per request. */
public class HeavyServlet extends HttpServlet {
    @Override
    protected void doGet(HttpServletRequest request, HttpServletResponse response)
            throws IOException {
        response.setContentType("text/plain");
        response.getWriter().println(Busy.mix(System.nanoTime(), 3 * LightServlet.ROUNDS));
    }
}
