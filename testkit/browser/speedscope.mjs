// Opens a pprof profile in speedscope (its release build from npm, in Debian's headless
// chromium driven by playwright-core) the way a person does, with its "Browse" button, and
// prints as JSON what its "Sandwich" table lists, heaviest first: each function's total and
// self values. A screenshot of the flame chart goes to SCREENSHOT_DIR/speedscope.png.
//
//   node speedscope.mjs PROFILE SCREENSHOT_DIR
import { pathToFileURL, fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { launch } from "./chromium.mjs";

const [profile, shots] = process.argv.slice(2);
if (!shots) {
  console.error("usage: node speedscope.mjs PROFILE SCREENSHOT_DIR");
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const speedscope = join(here, "node_modules/speedscope/dist/release/index.html");

const browser = await launch();
const result = { errors: [] };
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
  page.on("pageerror", (error) => result.errors.push(String(error)));
  await page.goto(pathToFileURL(speedscope).href);
  await page.setInputFiles("input[type=file]", profile);
  await page.waitForSelector("text=Sandwich");
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(shots, "speedscope.png") });
  await page.click("text=Sandwich");
  await page.click("text=Total");
  await page.waitForTimeout(500);
  // The table's rows: total, self, name, one a line each.
  const text = await page.innerText("body");
  const row = /([\d,]+) \([\d.<>]+%\)\s+([\d,]+) \([\d.<>]+%\)\s+(.+)/g;
  const number = (digits) => Number(digits.replaceAll(",", ""));
  result.functions = [...text.matchAll(row)].map((m) => ({
    total: number(m[1]),
    self: number(m[2]),
    name: m[3].trim(),
  }));
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
