// Debian's chromium, headless, driven by playwright-core (which downloads no browser of its own).
import { chromium } from "playwright-core";

// The flags this closed network needs: no background connections chromium would try at start.
// Playwright gives the browser a new, empty profile folder of its own.
export function launch() {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
